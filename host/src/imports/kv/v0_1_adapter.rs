//! `kv` for `wharf:plugin@0.1.0` components, on the current implementation
//! (`imports::v0_1` has what the adapters share).

use crate::imports::v0_1::{Answer, answer};
use crate::runtime::bindings::v0_1::backend::wharf::plugin0_1_0 as old;
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0 as new;

fn scope(s: old::kv::Scope) -> new::kv::Scope {
    match s {
        old::kv::Scope::Backend => new::kv::Scope::Backend,
        old::kv::Scope::Session => new::kv::Scope::Session,
    }
}

impl old::kv::Host for super::KvView<'_> {
    async fn get(&mut self, s: old::kv::Scope, key: String) -> Answer<Option<Vec<u8>>> {
        answer(new::kv::Host::get(self, scope(s), key).await, |v| v)
    }

    async fn set(&mut self, s: old::kv::Scope, key: String, value: Vec<u8>) -> Answer<()> {
        answer(new::kv::Host::set(self, scope(s), key, value).await, |v| v)
    }

    async fn delete(&mut self, s: old::kv::Scope, key: String) -> Answer<()> {
        answer(new::kv::Host::delete(self, scope(s), key).await, |v| v)
    }

    async fn list_keys(&mut self, s: old::kv::Scope, prefix: String) -> Answer<Vec<String>> {
        answer(
            new::kv::Host::list_keys(self, scope(s), prefix).await,
            |v| v,
        )
    }
}
