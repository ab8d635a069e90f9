//! Which sessions a caller may use on the session routes: its tenant's, and only those of
//! backends its token's allowlist names.

use crate::api::auth::Caller;
use crate::error_code::WharfError;
use crate::front_door::Wharf;
use crate::session_record::SessionRecord;

/// The caller's session `id`, if its token's allowlist lets it use the session's backend.
pub async fn permitted_session(
    wharf: &Wharf,
    caller: &Caller,
    id: &str,
) -> Result<SessionRecord, WharfError> {
    let record = wharf.session(caller.session_tenant(), id).await?;
    caller.require_tool(&record.backend, None)?;
    Ok(record)
}
