//! `kv`: durable key-value state in the state store, per backend or per session, with
//! quotas, so a backend keeps state across instances, restarts and nodes.

use super::guest_error;
use crate::error_code::{Code, WharfError};
use crate::runtime::bindings::backend::wharf::plugin::kv::{Host, Scope};
use crate::runtime::bindings::wit_types::Error;
use crate::runtime::host_state::HostState;
use crate::store::{KvScope, StateStore};

/// Longest key, bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Largest value, bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most keys in one scope.
pub const MAX_KEYS: u64 = 1_000;
/// Most bytes (keys plus values) in one scope.
pub const MAX_SCOPE_BYTES: u64 = 4 << 20;

fn wharf_error(e: WharfError) -> Error {
    let mut err = guest_error(e.code, e.message);
    err.retryable = e.retryable;
    err
}

impl HostState {
    fn kv(&self, scope: Scope) -> Result<(StateStore, KvScope), Error> {
        let store = self
            .services
            .store
            .clone()
            .ok_or_else(|| guest_error(Code::DependencyFailure, "no state store"))?;
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

fn check_key(key: &str) -> Result<(), Error> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(guest_error(
            Code::InvalidInput,
            format!("keys are 1–{MAX_KEY_BYTES} bytes"),
        ));
    }
    Ok(())
}

impl HostState {
    /// Runs one kv operation in its scope and counts it in the import metrics.
    async fn kv_op<T>(
        &mut self,
        import: &str,
        scope: Scope,
        op: impl AsyncFnOnce(&StateStore, &str, KvScope) -> Result<T, Error>,
    ) -> wasmtime::Result<Result<T, Error>> {
        let answer = match self.kv(scope) {
            Ok((store, scope)) => op(&store, &self.backend, scope).await,
            Err(e) => Err(e),
        };
        self.services
            .metrics
            .import_answer(&self.backend, import, Ok(answer))
    }
}

impl Host for HostState {
    async fn get(
        &mut self,
        scope: Scope,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        self.kv_op("kv.get", scope, async |store, backend, scope| {
            store
                .kv_get(backend, &scope, &key)
                .await
                .map_err(wharf_error)
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
            check_key(&key)?;
            if value.len() > MAX_VALUE_BYTES {
                return Err(guest_error(
                    Code::InvalidInput,
                    format!("values are at most {MAX_VALUE_BYTES} bytes"),
                ));
            }
            // Usage of every other key, in one aggregate query, plus this key's new size.
            let (keys, bytes) = store
                .kv_usage_except(backend, &scope, &key)
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
            store
                .kv_set(backend, &scope, &key, &value)
                .await
                .map_err(wharf_error)
        })
        .await
    }

    async fn delete(&mut self, scope: Scope, key: String) -> wasmtime::Result<Result<(), Error>> {
        self.kv_op("kv.delete", scope, async |store, backend, scope| {
            store
                .kv_delete(backend, &scope, &key)
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
                .kv_keys(backend, &scope, &prefix)
                .await
                .map_err(wharf_error)
        })
        .await
    }
}
