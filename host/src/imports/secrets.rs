//! `secrets` (contract 0.3.0): the values the operator granted a backend by name
//! (`[backends.NAME.grants.secrets]`, `policy::SecretGrants`), each read from its source when the
//! guest asks, so a rotated secret is seen on the next call and no value sits in the host
//! longer than one answer. In `wasi-http`'s shape: the backend's [`Grants`] are the import's
//! state in an instance, [`SecretsView`] what the generated `Host` is implemented on, and
//! [`add_to_linker`] links it for any store that hands out the imports' views.

use super::{HasView, HostImportsView, View, guest_error};
use crate::capped_file::{self, Links};
use crate::error_code::Code;
use crate::policy::{GrantedBy, Grants, MAX_SECRET_BYTES, SecretSource, check_secret_name};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::secrets::Host;
use wasmtime::component::Linker;

/// What one call of `secrets` sees: its context, the backend's grants (`secrets`, and who
/// gave them, for the refusal's advice), and where its answer is counted.
pub type SecretsView<'a> = View<'a, Grants>;

/// Links `secrets` (0.3.0 on) for a store that hands out the imports' contexts.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::secrets::add_to_linker::<
        T,
        HasView<Grants>,
    >(linker, HasView::view)?;
    Ok(())
}

impl SecretsView<'_> {
    async fn get(&self, name: &str) -> Result<String, Error> {
        check_secret_name(name).map_err(|why| guest_error(Code::InvalidInput, why))?;
        let Some(source) = self.ctx.secrets.source(name) else {
            let fix = match self.ctx.granted_by {
                GrantedBy::Operator => format!(
                    "the operator grants it under [backends.NAME.grants.secrets] as \
                     `{name} = \"env:VARIABLE\"` or `{name} = \"file:/path\"`"
                ),
                GrantedBy::Dev => "`wharf dev` grants no secrets; run the backend under \
                                   `wharf serve` with [backends.NAME.grants.secrets]"
                    .to_string(),
            };
            return Err(guest_error(
                Code::Forbidden,
                format!("secret `{name}` is not granted to this backend: {fix}"),
            ));
        };
        read(source).await.map_err(|why| {
            // The operator's detail (which variable or file, and the OS's words) goes to the
            // host's log; the guest learns only that the grant cannot be served.
            tracing::warn!(backend = %self.counter.backend(), secret = name, "secret unavailable: {why}");
            guest_error(
                Code::DependencyFailure,
                format!("secret `{name}` is granted but its source is unavailable on this host (the host's log says why)"),
            )
        })
    }
}

/// A granted secret's value, read now.
async fn read(source: &SecretSource) -> Result<String, String> {
    let bytes = match source {
        SecretSource::Env(variable) => std::env::var_os(variable)
            .ok_or_else(|| format!("environment variable `{variable}` is not set"))?
            .into_encoded_bytes(),
        SecretSource::File(path) => {
            capped_file::read(path.clone(), MAX_SECRET_BYTES, Links::Follow)
                .await
                .map_err(|e| format!("`{}`: {e}", path.display()))?
        }
    };
    if bytes.len() as u64 > MAX_SECRET_BYTES {
        return Err(format!("the value is over {MAX_SECRET_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "the value is not UTF-8".to_string())
}

impl Host for SecretsView<'_> {
    async fn get(&mut self, name: String) -> wasmtime::Result<Result<String, Error>> {
        let answer = SecretsView::get(self, &name).await;
        self.counter.counted("secrets.get", answer)
    }

    async fn names(&mut self) -> wasmtime::Result<Vec<String>> {
        self.counter.record("secrets.names", true);
        Ok(self.ctx.secrets.names().map(str::to_string).collect())
    }
}
