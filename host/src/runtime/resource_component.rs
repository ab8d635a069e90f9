//! A resource backend as loaded: its pool of instances, and the [`Backend`] face that
//! runs its hooks and tools through [`guest_call::run`].

use crate::error_code::WharfError;
use crate::imports::services::HostServices;
use crate::policy::Grants;
use crate::runtime::backend::{Backend, PoolWatch, SessionStart, ToolCall};
use crate::runtime::backend_description::listed_tool;
use crate::runtime::guest_call::{self, CallSite, guest_json};
use crate::runtime::guest_types::{Discovery, RawDiscovery, RawToolOutput, SessionView, answer};
use crate::runtime::instance_pool::{InstancePool, PoolSettings, on_guest};
use crate::runtime::resource_guest::{ResourceExports, ResourcePre};
use crate::tool::{ToolDescription, ToolResult};
use anyhow::Result;
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

/// A running resource backend.
pub struct ResourceComponent {
    pool: Arc<InstancePool<ResourcePre>>,
}

/// The operator's config as `warmup` and `initialize` get it: JSON text, or empty.
pub(crate) fn config_text(config: &Value) -> String {
    if config.is_null() {
        String::new()
    } else {
        config.to_string()
    }
}

impl ResourceComponent {
    /// Starts the pool (warming `settings.min` instances).
    pub async fn start(
        name: Arc<str>,
        pre: ResourcePre,
        settings: PoolSettings,
        config: &Value,
        grants: Arc<Grants>,
        services: Arc<HostServices>,
    ) -> Result<Self> {
        let pool =
            InstancePool::start(name, pre, settings, config_text(config), grants, services).await?;
        Ok(Self { pool })
    }

    /// A hook's call of the host's own for `tenant`, in `session` if any.
    fn hook_site<'a>(&self, tenant: &'a Arc<str>, session: Option<&'a str>) -> CallSite<'a> {
        CallSite::new(tenant, session, self.pool.settings().hook_timeout)
    }
}

#[async_trait]
impl Backend for ResourceComponent {
    async fn call(&self, call: ToolCall) -> Result<ToolResult, WharfError> {
        let session_id = call.session.as_ref().map(|s| s.id.as_str());
        let site = CallSite {
            trace_id: call.trace_id.as_deref(),
            output: call.output.as_ref(),
            cancel: call.cancel.as_ref(),
            ..CallSite::new(&call.tenant, session_id, call.timeout)
        };
        let args = call.args.to_string();
        let out: RawToolOutput = guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ResourceExports(exports), |g| {
                let session = call.session.as_ref().map(Into::into);
                answer(
                    g.call_call(store, &call.action, &args, session.as_ref())
                        .await,
                )
            })
        })
        .await?;
        let session_data = match out.session_data {
            Some(text) if text.len() > crate::bounded::MAX_SESSION_DATA_BYTES => {
                return Err(WharfError::new(
                    crate::error_code::Code::ExecutionError,
                    format!(
                        "the backend returned {} bytes of session data; a session keeps at most {} (keep large state in kv or a sandbox): the session is unchanged",
                        text.len(),
                        crate::bounded::MAX_SESSION_DATA_BYTES
                    ),
                ));
            }
            Some(text) => Some(guest_json(&text, "the session data the backend returned")?),
            None => None,
        };
        Ok(ToolResult {
            content: serde_json::from_str(&out.content).unwrap_or(Value::String(out.content)),
            attachments: out.attachments,
            session_data,
        })
    }

    async fn list_tools(&self) -> Result<Option<Vec<ToolDescription>>, WharfError> {
        let site = self.hook_site(crate::quotas::host_tenant(), None);
        let listed = guest_call::run(&self.pool, site, async |exports, store| {
            exports.list_tools(store).await
        })
        .await?;
        Ok(listed.map(|tools| tools.into_iter().map(listed_tool).collect()))
    }

    async fn initialize(&self, start: SessionStart) -> Result<Value, WharfError> {
        let config = config_text(&start.config);
        let site = self.hook_site(&start.tenant, Some(&start.id));
        let data: String = guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ResourceExports(exports), |g| answer(
                g.call_initialize(store, &start.id, &start.key, &config)
                    .await
            ))
        })
        .await?;
        guest_json(&data, "the session data initialize returned")
    }

    async fn cleanup(&self, session: &SessionView) -> Result<(), WharfError> {
        let site = self.hook_site(crate::quotas::host_tenant(), Some(&session.id));
        guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ResourceExports(exports), |g| answer(
                g.call_cleanup(store, &session.into()).await
            ))
        })
        .await
    }

    async fn discover(&self, session: &SessionView) -> Result<Discovery, WharfError> {
        let site = self.hook_site(crate::quotas::host_tenant(), Some(&session.id));
        let found: RawDiscovery = guest_call::run(&self.pool, site, async |exports, store| {
            on_guest!(ResourceExports(exports), |g| answer(
                g.call_discover(store, &session.into()).await
            ))
        })
        .await?;
        Ok(match found {
            RawDiscovery::Alive => Discovery::Alive,
            RawDiscovery::AliveWith(data) => {
                Discovery::AliveWith(guest_json(&data, "the data discover returned")?)
            }
            RawDiscovery::Gone => Discovery::Gone,
        })
    }

    async fn drain(&self) {
        self.pool.drain().await
    }

    fn pool(&self) -> Arc<dyn PoolWatch> {
        self.pool.clone()
    }
}
