//! Traces (ARCHITECTURE.md, "Traces"): OpenTelemetry spans exported over OTLP/HTTP when
//! `[telemetry] otlp_endpoint` is set. The layer is part of the subscriber from the first
//! line of `main` and inert until [`start`]; once started it sees Wharf's spans (the
//! request, the guest call, the store at `debug`) and the `trace`-level span wasmtime's
//! bindings open around every host import, and nothing else. Export runs on the SDK's own
//! thread with a bounded queue: a slow or absent collector drops spans, never delays a call.

use crate::config::TelemetryConfig;
use anyhow::{Result, anyhow};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use std::any::TypeId;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::Registry;

mod import_names;

type Inner = OpenTelemetryLayer<Registry, SdkTracer>;

static LAYER: OnceLock<Inner> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether spans are being exported.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// The module wasmtime's generated bindings live in: their import spans are at `trace`.
const BINDINGS_TARGET: &str = "wharf::runtime::bindings";

/// What the exporter sees: Wharf's spans to `debug`, the import spans of the bindings, and
/// warnings and errors as span events. Nothing from other crates.
fn wanted(meta: &Metadata<'_>) -> bool {
    if !active() || !meta.target().starts_with("wharf") {
        return false;
    }
    if meta.is_span() {
        *meta.level() <= Level::DEBUG || meta.target().starts_with(BINDINGS_TARGET)
    } else {
        *meta.level() <= Level::WARN
    }
}

/// The layer to put first on the registry in `main`; it exports nothing until [`start`].
pub fn layer() -> impl Layer<Registry> {
    Deferred.with_filter(Wanted)
}

/// [`wanted`] as a filter whose level hint follows [`active`]: while export is off it asks
/// for nothing, so it does not raise the subscriber's maximum level (a filter without a
/// hint makes every `trace!` callsite in every crate reach the subscriber).
struct Wanted;

impl<S> tracing_subscriber::layer::Filter<S> for Wanted {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        wanted(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        // Cached per callsite; `start` rebuilds the cache when export turns on.
        if wanted(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(if active() {
            LevelFilter::TRACE
        } else {
            LevelFilter::OFF
        })
    }
}

/// Starts export once per process (later calls keep the first): builds the OTLP/HTTP
/// exporter and the batch processor, then turns the layer on. Without an endpoint it does
/// nothing.
pub fn start(config: &TelemetryConfig) -> Result<()> {
    config.validate()?;
    let Some(url) = config.traces_url()? else {
        return Ok(());
    };
    if LAYER.get().is_some() {
        return Ok(());
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .with_timeout(config.export_timeout())
        .with_headers(config.headers.clone().into_iter().collect())
        .build()
        .map_err(|e| anyhow!("telemetry: cannot build the OTLP exporter for {url}: {e}"))?;
    let batches = BatchConfigBuilder::default()
        .with_scheduled_delay(config.export_interval())
        .with_max_queue_size(config.max_queue_spans)
        .with_max_export_batch_size(config.max_queue_spans.min(512))
        .build();
    let processor = BatchSpanProcessor::builder(import_names::ImportNames(exporter))
        .with_batch_config(batches)
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(config.service_name.clone())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("wharf");
    let layer = tracing_opentelemetry::layer().with_tracer(tracer);
    if LAYER.set(layer).is_err() || PROVIDER.set(provider).is_err() {
        return Ok(());
    }
    let installed = tracing::dispatcher::get_default(|d| d.downcast_ref::<Deferred>().is_some());
    if !installed {
        tracing::warn!(
            "telemetry: this process's subscriber has no trace layer; nothing is exported"
        );
    }
    ACTIVE.store(true, Ordering::Release);
    // Callsites already registered cached "not wanted" while the layer was off.
    tracing::callsite::rebuild_interest_cache();
    tracing::info!(endpoint = %url, "telemetry: exporting traces over OTLP/HTTP");
    Ok(())
}

/// Sends the spans still queued, waiting at most `timeout`; called at shutdown. The SDK's
/// flush blocks, so it runs on a thread of its own.
pub fn flush(timeout: Duration) {
    let Some(provider) = PROVIDER.get() else {
        return;
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("wharf-telemetry-flush".into())
        .spawn(move || {
            let _ = done_tx.send(provider.force_flush());
        });
    if spawned.is_ok() && done_rx.recv_timeout(timeout).is_err() {
        tracing::warn!("telemetry: spans still queued at shutdown were not sent in time");
    }
}

/// The span of one request on a protocol adapter, and the trace id its answer carries: the
/// span's OpenTelemetry trace id while export is on (so an envelope's `trace_id` finds its
/// trace in the operator's tool), else a fresh random id.
pub fn request_span(protocol: &'static str, token: &str) -> (tracing::Span, String) {
    // Debug, like the guest call's span: a span some layer enables costs every call a slab
    // entry and its formatted fields, so it exists only when it is exported or shown.
    let span = tracing::debug_span!("request", otel.name = protocol, token = %token);
    let trace_id = if active() {
        let context = span.context();
        let ids = context.span().span_context().clone();
        ids.is_valid().then(|| ids.trace_id().to_string())
    } else {
        None
    };
    let trace_id = trace_id.unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    (span, trace_id)
}

/// Records the id a client sent (the compatibility API's `trace_id`) on the request's span,
/// where the operator can search for it.
pub fn record_client_trace_id(span: &tracing::Span, client_trace_id: &str) {
    if active() {
        span.set_attribute("wharf.client_trace_id", client_trace_id.to_string());
    }
}

/// The OpenTelemetry layer, forwarded to once [`start`] built it. A `OnceLock` rather than
/// `tracing_subscriber::reload`: reload cannot hand out the layer's context (`downcast_raw`),
/// which [`request_span`] needs for the trace id, and this one is never replaced.
struct Deferred;

impl Layer<Registry> for Deferred {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_new_span(attrs, id, ctx);
        }
    }

    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_record(span, values, ctx);
        }
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_follows_from(span, follows, ctx);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_event(event, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_enter(id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_exit(id, ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_close(id, ctx);
        }
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, Registry>) {
        if let Some(inner) = LAYER.get() {
            inner.on_id_change(old, new, ctx);
        }
    }

    #[allow(unsafe_code)]
    // SAFETY: the inner layer lives in a `static` that is set once and never replaced, so a
    // pointer it hands out stays valid for the rest of the process.
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        let inner = LAYER.get()?;
        // SAFETY: forwarded as is; see above.
        unsafe { inner.downcast_raw(id) }
    }
}
