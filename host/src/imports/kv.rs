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

impl Host for HostState {
    async fn get(
        &mut self,
        scope: Scope,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        let (metrics, backend) = (self.services.metrics.clone(), self.backend.clone());
        let answer = async move {
            let (store, scope) = match self.kv(scope) {
                Ok(s) => s,
                Err(e) => return Ok(Err(e)),
            };
            Ok(store
                .kv_get(&self.backend, &scope, &key)
                .await
                .map_err(wharf_error))
        }
        .await;
        metrics.import_answer(&backend, "kv.get", answer)
    }

    async fn set(
        &mut self,
        scope: Scope,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let (metrics, backend) = (self.services.metrics.clone(), self.backend.clone());
        let answer = async move {
            let (store, scope) = match self.kv(scope) {
                Ok(s) => s,
                Err(e) => return Ok(Err(e)),
            };
            if let Err(e) = check_key(&key) {
                return Ok(Err(e));
            }
            if value.len() > MAX_VALUE_BYTES {
                return Ok(Err(guest_error(
                    Code::InvalidInput,
                    format!("values are at most {MAX_VALUE_BYTES} bytes"),
                )));
            }
            let usage = match store.kv_usage(&self.backend, &scope).await {
                Ok(u) => u,
                Err(e) => return Ok(Err(wharf_error(e))),
            };
            let existing = store
                .kv_get(&self.backend, &scope, &key)
                .await
                .ok()
                .flatten();
            let (keys, bytes) = usage;
            let new_keys = keys + u64::from(existing.is_none());
            let new_bytes = bytes - existing.map_or(0, |v| (key.len() + v.len()) as u64)
                + (key.len() + value.len()) as u64;
            if new_keys > MAX_KEYS || new_bytes > MAX_SCOPE_BYTES {
                return Ok(Err(guest_error(
                    Code::Forbidden,
                    format!(
                        "kv quota exceeded: at most {MAX_KEYS} keys and {} MiB per scope",
                        MAX_SCOPE_BYTES >> 20
                    ),
                )));
            }
            Ok(store
                .kv_set(&self.backend, &scope, &key, &value)
                .await
                .map_err(wharf_error))
        }
        .await;
        metrics.import_answer(&backend, "kv.set", answer)
    }

    async fn delete(&mut self, scope: Scope, key: String) -> wasmtime::Result<Result<(), Error>> {
        let (metrics, backend) = (self.services.metrics.clone(), self.backend.clone());
        let answer = async move {
            let (store, scope) = match self.kv(scope) {
                Ok(s) => s,
                Err(e) => return Ok(Err(e)),
            };
            Ok(store
                .kv_delete(&self.backend, &scope, &key)
                .await
                .map_err(wharf_error))
        }
        .await;
        metrics.import_answer(&backend, "kv.delete", answer)
    }

    async fn list_keys(
        &mut self,
        scope: Scope,
        prefix: String,
    ) -> wasmtime::Result<Result<Vec<String>, Error>> {
        let (metrics, backend) = (self.services.metrics.clone(), self.backend.clone());
        let answer = async move {
            let (store, scope) = match self.kv(scope) {
                Ok(s) => s,
                Err(e) => return Ok(Err(e)),
            };
            Ok(store
                .kv_keys(&self.backend, &scope, &prefix)
                .await
                .map_err(wharf_error))
        }
        .await;
        metrics.import_answer(&backend, "kv.list-keys", answer)
    }
}
