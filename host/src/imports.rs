//! Host imports: one file per interface, each with its grant checks, its one wrapper (each
//! ends in [`ImportCounter::counted`], the import metrics) and its `add_to_linker` for every
//! contract version it serves. [`add_to_linker`] below is the one list of them. Guest
//! mistakes and policy denials come back as WIT errors; only host bugs trap.
//! (ARCHITECTURE.md, "Adding a host import".)
//!
//! The shape is `wasi-http`'s: an import owns its context (its field of
//! [`ImportContexts`], found by [`ImportContext`]), implements the generated `Host` on its
//! own [`View`] of the store (a borrow of that context, the call and the counter, nothing
//! else), and links itself with [`HasView`] for any store whose data is [`HostImportsView`].
//! Every `wharf:plugin` import has that shape (`exec`, `process`, `files`, `freezer` and
//! `sandboxing` share `container`'s context and view: they act on the caller's own
//! containers; `egress` and `secrets` answer from the backend's grants; `log`, `progress`
//! and `cancellation` have no context, only the call); `wasi:http` keeps wasmtime's own
//! (`http::HttpCtx`, linked by `runtime::linker`).

pub mod cancellation;
pub mod container;
pub(crate) mod container_quota;
pub mod container_turns;
pub mod egress;
pub mod exec;
pub mod files;
pub mod freezer;
pub mod host_mounts;
pub mod http;
pub mod kv;
pub mod log;
pub mod process;
pub mod progress;
pub mod sandboxing;
pub mod secrets;
pub mod services;
pub mod v0_1;

use crate::error_code::Code;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types as wit_types;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::{HasData, Linker};

/// The context of the call in progress; cleared at check-in so nothing leaks to the next.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The tenant whose request the call serves ([`HOST_TENANT`](crate::quotas::HOST_TENANT)
    /// for the host's own work: warmups, sweeps, releases): its quotas apply to what the
    /// call creates.
    pub tenant: Arc<str>,
    /// The session the call runs in.
    pub session_id: Option<String>,
    /// When the call must be over.
    pub deadline: Option<Instant>,
    /// Set by the epoch callback when it stopped the guest at the deadline.
    pub deadline_hit: bool,
    /// The request's trace id, for logs.
    pub trace_id: Option<String>,
    /// What the guest said (`log.panic`) before it trapped.
    pub panic: Option<String>,
    /// Where the call's output goes while it runs (a streaming caller's), if anywhere:
    /// `exec` streams a command's output there.
    pub output: Option<crate::call_output::OutputSink>,
    /// What a session asked of the sandbox this call provisions (`container.create`
    /// applies it to every container it makes, and counts them).
    pub sandbox: Option<Arc<crate::policy::SandboxProfile>>,
    /// The snapshot this call is to commit, if the host asked for one.
    pub snapshot: Option<Arc<crate::engines::container_types::SnapshotAsk>>,
    /// The backend's last `progress.report` in this call (the next must say more).
    pub last_progress: Option<f64>,
    /// Fired when the caller gives up on the call (imports that wait answer 4990).
    pub cancel: Option<tokio_util::sync::CancellationToken>,
}

impl Default for CallContext {
    fn default() -> Self {
        Self {
            tenant: crate::quotas::host_tenant().clone(),
            session_id: None,
            deadline: None,
            deadline_hit: false,
            trace_id: None,
            panic: None,
            output: None,
            sandbox: None,
            snapshot: None,
            last_progress: None,
            cancel: None,
        }
    }
}

/// Where every import's answers are counted (`wharf_imports_total{backend, import,
/// outcome}`), for one backend's instance.
#[derive(Debug, Clone)]
pub struct ImportCounter {
    backend: Arc<str>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl ImportCounter {
    /// The backend whose calls are counted.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Counts one call of `import` (`interface.function`) that ended `ok` or not.
    pub fn record(&self, import: &str, ok: bool) {
        self.metrics.record_import(&self.backend, import, ok);
    }

    /// Counts `answer` of `import` (`interface.function`) and hands it on.
    pub fn counted<T>(
        &self,
        import: &str,
        answer: Result<T, wit_types::Error>,
    ) -> wasmtime::Result<Result<T, wit_types::Error>> {
        self.metrics
            .import_answer(&self.backend, import, Ok(answer))
    }
}

/// Every import's own context in one instance's store, side by side: an import's view
/// borrows its own field and the counter, never another's.
#[derive(Debug)]
pub struct ImportContexts {
    counter: ImportCounter,
    container: container::ContainerCtx,
    kv: kv::KvCtx,
    /// The backend's grants: the whole context of `egress` and `secrets`, which answer from
    /// them alone.
    grants: Arc<crate::policy::Grants>,
}

impl ImportContexts {
    /// The contexts of an instance of `backend`, granted `grants`, over the process-wide
    /// `services`.
    pub fn new(
        backend: Arc<str>,
        grants: &Arc<crate::policy::Grants>,
        services: &Arc<services::HostServices>,
    ) -> Self {
        Self {
            counter: ImportCounter {
                backend,
                metrics: services.metrics.clone(),
            },
            container: container::ContainerCtx::new(grants.clone(), services),
            kv: kv::KvCtx::new(services),
            grants: grants.clone(),
        }
    }

    /// Where the imports' answers are counted.
    pub fn counter(&self) -> &ImportCounter {
        &self.counter
    }
}

/// What a store's data lends the host imports: their contexts and the call in progress.
pub struct ImportsView<'a> {
    /// Every import's context (each import's view takes its own).
    pub contexts: &'a ImportContexts,
    /// The call in progress (its session, deadline and trace id; `log.panic` writes it).
    pub call: &'a mut CallContext,
}

/// What a store's data gives the host imports (wasi-http's `WasiHttpView`).
pub trait HostImportsView: Send + 'static {
    /// The imports' contexts and the call in progress.
    fn host_imports(&mut self) -> ImportsView<'_>;
}

/// An import's own context: its field of [`ImportContexts`] (the backend's grants for
/// `egress` and `secrets`), or `()` for an import that has none (`log`, `progress`,
/// `cancellation`).
pub trait ImportContext: Sync + 'static {
    /// This import's context among `contexts`.
    fn of(contexts: &ImportContexts) -> &Self;
}

impl ImportContext for () {
    fn of(_: &ImportContexts) -> &Self {
        &()
    }
}

impl ImportContext for crate::policy::Grants {
    fn of(contexts: &ImportContexts) -> &Self {
        &contexts.grants
    }
}

/// What one call of an import sees, the type its generated `Host` is implemented on (each
/// import names it `NameView`): its own context, the call in progress (its session,
/// deadline and trace id) and the counter, nothing else of the store.
pub struct View<'a, C> {
    ctx: &'a C,
    call: &'a mut CallContext,
    counter: &'a ImportCounter,
}

/// The `HasData` an import is linked with (wasi-http's `HasWasiHttp`): the [`View`] over its
/// context `C`.
pub struct HasView<C>(PhantomData<C>);

impl<C: ImportContext> HasData for HasView<C> {
    type Data<'a> = View<'a, C>;
}

impl<C: ImportContext> HasView<C> {
    /// The view of a store's data that the generated `add_to_linker` is given.
    pub fn view<T: HostImportsView>(state: &mut T) -> View<'_, C> {
        let imports = state.host_imports();
        View {
            ctx: C::of(imports.contexts),
            call: imports.call,
            counter: imports.contexts.counter(),
        }
    }
}

/// One import's `add_to_linker`.
type LinkImport<T> = fn(&mut Linker<T>) -> anyhow::Result<()>;

/// Links every `wharf:plugin` import, each for every contract version it serves, for any
/// store whose data is [`HostImportsView`]: the registration list (a new import adds its
/// line here). `runtime::linker` adds WASI, `wasi:http` and the `types` interfaces.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    let imports: &[LinkImport<T>] = &[
        log::add_to_linker,
        kv::add_to_linker,
        container::add_to_linker,
        exec::add_to_linker,
        process::add_to_linker,
        files::add_to_linker,
        freezer::add_to_linker,
        sandboxing::add_to_linker,
        progress::add_to_linker,
        cancellation::add_to_linker,
        egress::add_to_linker,
        secrets::add_to_linker,
    ];
    imports.iter().try_for_each(|link| link(linker))
}

/// A WIT error for the guest.
pub fn guest_error(code: Code, message: impl Into<String>) -> wit_types::Error {
    wit_types::Error {
        code: code.as_u32(),
        message: message.into(),
        retryable: false,
        data: None,
    }
}

/// A host error as the guest sees it, code and retryability kept.
pub fn wharf_error(e: crate::error_code::WharfError) -> wit_types::Error {
    let mut err = guest_error(e.code, e.message);
    err.retryable = e.retryable;
    err
}

/// The answer of an import whose capability the operator has not granted this backend.
pub fn not_granted(what: &str) -> wit_types::Error {
    guest_error(
        Code::Forbidden,
        format!("{what} is not granted to this backend"),
    )
}
