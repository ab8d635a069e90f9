//! Names the spans wasmtime's bindings open around host imports after the import they
//! time (`import kv.get`), where the bindings call every one of them `wit-bindgen import`.

use opentelemetry::Value;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use std::borrow::Cow;

/// The name wasmtime's generated bindings give every import span.
const BINDINGS_SPAN: &str = "wit-bindgen import";

/// An exporter that renames import spans before passing them on.
#[derive(Debug)]
pub struct ImportNames<E>(pub E);

impl<E: SpanExporter> SpanExporter for ImportNames<E> {
    fn export(
        &self,
        mut batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        for span in &mut batch {
            rename(span);
        }
        self.0.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource);
    }
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn rename(span: &mut SpanData) {
    if span.name != BINDINGS_SPAN {
        return;
    }
    let (Some(module), Some(function)) = (attribute(span, "module"), attribute(span, "function"))
    else {
        return;
    };
    span.name = Cow::Owned(format!("import {module}.{function}"));
}
