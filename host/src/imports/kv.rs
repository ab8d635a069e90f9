//! `kv`: durable key-value state in the host's key-value store (`engines::KvStore`: the
//! state store, or the disabled store's 5012), per backend or per session, with quotas, so
//! a backend keeps state across instances, restarts and nodes.

mod v0_1_adapter;

use super::{
    HasView, HostImportsView, ImportContext, ImportContexts, View, guest_error, wharf_error,
};
use crate::engines::kv::ScopeWrites;
use crate::engines::{KvScope, KvStore};
use crate::error_code::Code;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::kv::{Host, Scope};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::{v0_1, v0_2};
use std::sync::Arc;
use wasmtime::component::Linker;

/// The `kv` import's state in one instance: the store and this node's scope write turns.
#[derive(Debug, Clone)]
pub struct KvCtx {
    store: Arc<dyn KvStore>,
    writes: Arc<ScopeWrites>,
}

impl KvCtx {
    /// The context over the host's key-value store.
    pub fn new(services: &super::services::HostServices) -> Self {
        Self {
            store: services.kv.clone(),
            writes: services.kv_writes.clone(),
        }
    }
}

/// What one call of `kv` sees: the context, the call (its session) and the counter.
pub type KvView<'a> = View<'a, KvCtx>;

impl ImportContext for KvCtx {
    fn of(contexts: &ImportContexts) -> &Self {
        &contexts.kv
    }
}

/// Links `kv` for components of every served contract version (0.1.0 through `v0_1`).
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    v0_2::backend::wharf::plugin0_2_0::kv::add_to_linker::<T, HasView<KvCtx>>(
        linker,
        HasView::view,
    )?;
    v0_1::backend::wharf::plugin0_1_0::kv::add_to_linker::<T, HasView<KvCtx>>(
        linker,
        HasView::view,
    )?;
    Ok(())
}

/// Longest key, bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Largest value, bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most keys in one scope.
pub const MAX_KEYS: u64 = 1_000;
/// Most bytes (keys plus values) in one scope.
pub const MAX_SCOPE_BYTES: u64 = 4 << 20;

impl KvView<'_> {
    fn kv(&self, scope: Scope) -> Result<(Arc<dyn KvStore>, KvScope), Error> {
        let store = self.ctx.store.clone();
        let scope = match scope {
            Scope::Backend => KvScope::Backend,
            Scope::Session => match &self.call.session_id {
                Some(id) => KvScope::Session(id.clone()),
                None => {
                    return Err(guest_error(
                        Code::SessionNotFound,
                        "kv with session scope needs a session call",
                    ));
                }
            },
        };
        Ok((store, scope))
    }
}

/// Refuses a write of `value` under `key` that would break the scope's quotas.
async fn check_quota(
    store: &dyn KvStore,
    backend: &str,
    scope: &KvScope,
    key: &str,
    value: &[u8],
) -> Result<(), Error> {
    check_key(key)?;
    if value.len() > MAX_VALUE_BYTES {
        return Err(guest_error(
            Code::InvalidInput,
            format!("values are at most {MAX_VALUE_BYTES} bytes"),
        ));
    }
    // Usage of every other key, in one aggregate query, plus this key's new size.
    let (keys, bytes) = store
        .usage_except(backend, scope, key)
        .await
        .map_err(wharf_error)?;
    if keys + 1 > MAX_KEYS || bytes + (key.len() + value.len()) as u64 > MAX_SCOPE_BYTES {
        return Err(guest_error(
            Code::Forbidden,
            format!(
                "kv quota exceeded: at most {MAX_KEYS} keys and {} MiB per scope",
                MAX_SCOPE_BYTES >> 20
            ),
        ));
    }
    Ok(())
}

/// Replaces `expected` (`None`: absent) with `new` (`None`: delete), atomically.
async fn compare_and_swap(
    store: &dyn KvStore,
    backend: &str,
    scope: &KvScope,
    key: &str,
    expected: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<bool, Error> {
    if let Some(value) = new {
        check_quota(store, backend, scope, key, value).await?;
    }
    let swapped = match (expected, new) {
        (None, Some(value)) => store.insert_if_absent(backend, scope, key, value).await,
        (Some(old), new) => store.replace_if(backend, scope, key, old, new).await,
        (None, None) => store
            .get(backend, scope, key)
            .await
            .map(|found| found.is_none()),
    };
    swapped.map_err(wharf_error)
}

/// How many times `increment` retries its compare-and-swap when other writers race it.
const INCREMENT_ATTEMPTS: u32 = 64;

fn check_key(key: &str) -> Result<(), Error> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(guest_error(
            Code::InvalidInput,
            format!("keys are 1–{MAX_KEY_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// A scope's write turn; the scope's entry goes when the last holder lets go.
struct ScopeWrite {
    writes: Arc<ScopeWrites>,
    key: String,
    turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for ScopeWrite {
    fn drop(&mut self) {
        // The turn goes first: the map's is then the scope lock's last reference unless
        // another write waits for it.
        self.turn = None;
        self.writes.forget_unused(&self.key);
    }
}

/// The store as `kv_op` hands it to an operation (a named type: see
/// `container::Engine`), with the host's scope write turns.
struct Kv(Arc<dyn KvStore>, Arc<ScopeWrites>);

impl Kv {
    /// Waits for `scope`'s write turn.
    async fn hold(&self, backend: &str, scope: &KvScope) -> ScopeWrite {
        let key = format!("{backend}\u{0}{scope:?}");
        let lock = self.1.lock_for(&key);
        ScopeWrite {
            writes: self.1.clone(),
            key,
            turn: Some(lock.lock_owned().await),
        }
    }
}

impl std::ops::Deref for Kv {
    type Target = dyn KvStore;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl KvView<'_> {
    /// The one wrapper of a `kv` call: the store and the scope, then the operation, counted.
    async fn kv_op<T>(
        &mut self,
        import: &str,
        scope: Scope,
        op: impl AsyncFnOnce(Kv, &str, KvScope) -> Result<T, Error>,
    ) -> wasmtime::Result<Result<T, Error>> {
        let answer = match self.kv(scope) {
            Ok((store, scope)) => {
                let writes = self.ctx.writes.clone();
                op(Kv(store, writes), self.counter.backend(), scope).await
            }
            Err(e) => Err(e),
        };
        self.counter.counted(import, answer)
    }
}

impl Host for KvView<'_> {
    async fn get(
        &mut self,
        scope: Scope,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        self.kv_op("kv.get", scope, async |store, backend, scope| {
            store.get(backend, &scope, &key).await.map_err(wharf_error)
        })
        .await
    }

    async fn set(
        &mut self,
        scope: Scope,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.kv_op("kv.set", scope, async |store, backend, scope| {
            let _turn = store.hold(backend, &scope).await;
            check_quota(&*store, backend, &scope, &key, &value).await?;
            store
                .set(backend, &scope, &key, &value)
                .await
                .map_err(wharf_error)
        })
        .await
    }

    async fn delete(&mut self, scope: Scope, key: String) -> wasmtime::Result<Result<(), Error>> {
        self.kv_op("kv.delete", scope, async |store, backend, scope| {
            store
                .delete(backend, &scope, &key)
                .await
                .map_err(wharf_error)
        })
        .await
    }

    async fn list_keys(
        &mut self,
        scope: Scope,
        prefix: String,
    ) -> wasmtime::Result<Result<Vec<String>, Error>> {
        self.kv_op("kv.list-keys", scope, async |store, backend, scope| {
            store
                .keys(backend, &scope, &prefix)
                .await
                .map_err(wharf_error)
        })
        .await
    }

    async fn increment(
        &mut self,
        scope: Scope,
        key: String,
        delta: i64,
    ) -> wasmtime::Result<Result<i64, Error>> {
        self.kv_op("kv.increment", scope, async |store, backend, scope| {
            check_key(&key)?;
            for _ in 0..INCREMENT_ATTEMPTS {
                let current = store
                    .get(backend, &scope, &key)
                    .await
                    .map_err(wharf_error)?;
                let now = match &current {
                    None => 0,
                    Some(bytes) => std::str::from_utf8(bytes)
                        .ok()
                        .and_then(|text| text.trim().parse::<i64>().ok())
                        .ok_or_else(|| {
                            guest_error(
                                Code::InvalidInput,
                                format!("the value under `{key}` is not a decimal 64-bit integer"),
                            )
                        })?,
                };
                let next = now.checked_add(delta).ok_or_else(|| {
                    guest_error(
                        Code::InvalidInput,
                        format!("adding {delta} to {now} under `{key}` overflows 64 bits"),
                    )
                })?;
                let text = next.to_string();
                let _turn = store.hold(backend, &scope).await;
                if compare_and_swap(
                    &*store,
                    backend,
                    &scope,
                    &key,
                    current.as_deref(),
                    Some(text.as_bytes()),
                )
                .await?
                {
                    return Ok(next);
                }
            }
            Err(guest_error(
                Code::Conflict,
                format!(
                    "`{key}` kept changing under {INCREMENT_ATTEMPTS} attempts to increment it"
                ),
            ))
        })
        .await
    }

    async fn compare_and_swap(
        &mut self,
        scope: Scope,
        key: String,
        expected: Option<Vec<u8>>,
        new: Option<Vec<u8>>,
    ) -> wasmtime::Result<Result<bool, Error>> {
        self.kv_op(
            "kv.compare-and-swap",
            scope,
            async |store, backend, scope| {
                check_key(&key)?;
                let _turn = match &new {
                    Some(_) => Some(store.hold(backend, &scope).await),
                    None => None,
                };
                compare_and_swap(
                    &*store,
                    backend,
                    &scope,
                    &key,
                    expected.as_deref(),
                    new.as_deref(),
                )
                .await
            },
        )
        .await
    }
}
