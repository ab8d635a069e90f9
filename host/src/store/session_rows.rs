//! Session rows: their states, decoding, reads and the writes outside the lease machine
//! (insert, data, activity, holder claims, delete). The lease transitions are in
//! `session_leases`.

use super::{SessionRecord, SessionState};
use super::{StateStore, column};
use crate::bounded::{MAX_TIMESTAMP_MS, MAX_TTL_SECONDS, from_column, to_column};
use crate::error_code::WharfError;
use serde_json::Value;
use sqlx::any::AnyRow;

pub(super) const COLUMNS: &str = "id, tenant, backend, skey, state, data, owner, holder, holder_until, plugin_version, node, \
                       lease_until, created_at, last_activity, idle_ttl, max_expires_at, generation, paused_until, archive";

/// A stored row that does not decode into a session: a column out of range, an unknown
/// state, data that is not JSON. Listings skip it (and say so); it is never acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSessionRow {
    /// The row's id (empty when even that could not be read).
    pub id: String,
    /// What is wrong with it.
    pub reason: String,
}

impl BadSessionRow {
    fn error(&self) -> WharfError {
        WharfError::internal(format!(
            "the stored session `{}` is damaged ({}); remove its row",
            self.id, self.reason
        ))
    }
}

/// Decodes a row, checking every number against its bound: nothing read back from the
/// store is trusted more than a request.
fn decode(row: &AnyRow) -> Result<Result<SessionRecord, BadSessionRow>, WharfError> {
    let id: String = column(row, "id")?;
    let bad = |reason: String| BadSessionRow {
        id: id.clone(),
        reason,
    };
    let checked = |c: &str, max: u64| -> Result<Result<u64, BadSessionRow>, WharfError> {
        let v: i64 = column(row, c)?;
        Ok(from_column(v, max).ok_or_else(|| bad(format!("`{c}` is {v}, outside 0..={max}"))))
    };
    let state = column::<String>(row, "state")?;
    let Some(state) = SessionState::parse(&state) else {
        return Ok(Err(bad(format!("unknown state `{state}`"))));
    };
    let data = match serde_json::from_str(&column::<String>(row, "data")?) {
        Ok(data) => data,
        Err(e) => return Ok(Err(bad(format!("`data` is not JSON: {e}")))),
    };
    let optional_time = |c: &str| -> Result<Result<Option<u64>, BadSessionRow>, WharfError> {
        Ok(match column::<Option<i64>>(row, c)? {
            None => Ok(None),
            Some(v) => from_column(v, MAX_TIMESTAMP_MS)
                .map(Some)
                .ok_or_else(|| bad(format!("`{c}` is {v}, out of range"))),
        })
    };
    let max_expires_at_ms = match optional_time("max_expires_at")? {
        Ok(v) => v,
        Err(bad) => return Ok(Err(bad)),
    };
    let paused_until_ms = match optional_time("paused_until")? {
        Ok(v) => v,
        Err(bad) => return Ok(Err(bad)),
    };
    macro_rules! bounded {
        ($name:literal, $max:expr) => {
            match checked($name, $max)? {
                Ok(v) => v,
                Err(bad) => return Ok(Err(bad)),
            }
        };
    }
    Ok(Ok(SessionRecord {
        id: id.clone(),
        tenant: column::<String>(row, "tenant")?,
        backend: column::<String>(row, "backend")?,
        key: column::<String>(row, "skey")?,
        state,
        data,
        owner: column(row, "owner")?,
        holder: column(row, "holder")?,
        holder_until_ms: bounded!("holder_until", MAX_TIMESTAMP_MS),
        plugin_version: column::<String>(row, "plugin_version")?,
        node: column::<String>(row, "node")?,
        lease_until_ms: bounded!("lease_until", MAX_TIMESTAMP_MS),
        created_at_ms: bounded!("created_at", MAX_TIMESTAMP_MS),
        last_activity_ms: bounded!("last_activity", MAX_TIMESTAMP_MS),
        idle_ttl_seconds: bounded!("idle_ttl", MAX_TTL_SECONDS),
        max_expires_at_ms,
        generation: bounded!("generation", i64::MAX as u64),
        paused_until_ms,
        archive: column(row, "archive")?,
    }))
}

/// One row that must decode: a damaged row is an error naming it.
pub(super) fn record(row: &AnyRow) -> Result<SessionRecord, WharfError> {
    decode(row)?.map_err(|bad| bad.error())
}

impl StateStore {
    /// Inserts a `creating` row, leased by `r.node` in this incarnation, unless the
    /// identity already has one; true when inserted.
    #[tracing::instrument(name = "store.insert_creating", level = "debug", skip_all)]
    pub async fn insert_creating(&self, r: &SessionRecord) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query(&format!(
            "INSERT INTO wharf_sessions ({COLUMNS}, boot) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
             ON CONFLICT (tenant, backend, skey) DO NOTHING"
        ))
        .bind(&r.id)
        .bind(&r.tenant)
        .bind(&r.backend)
        .bind(&r.key)
        .bind(SessionState::Creating.as_str())
        .bind(r.data.to_string())
        .bind(r.owner.clone())
        .bind(r.holder.clone())
        .bind(to_column(r.holder_until_ms))
        .bind(&r.plugin_version)
        .bind(&r.node)
        .bind(to_column(r.lease_until_ms))
        .bind(to_column(r.created_at_ms))
        .bind(to_column(r.last_activity_ms))
        .bind(to_column(r.idle_ttl_seconds))
        .bind(r.max_expires_at_ms.map(to_column))
        .bind(to_column(r.generation))
        .bind(r.paused_until_ms.map(to_column))
        .bind(r.archive.clone())
        .bind(self.boot())).await
    }

    /// The row of an identity.
    #[tracing::instrument(name = "store.find_session", level = "debug", skip_all)]
    pub async fn find_session(
        &self,
        tenant: &str,
        backend: &str,
        key: &str,
    ) -> Result<Option<SessionRecord>, WharfError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM wharf_sessions WHERE tenant = $1 AND backend = $2 AND skey = $3"
        );
        let statement = sqlx::query(&sql).bind(tenant).bind(backend).bind(key);
        self.fetch_optional(statement, record).await
    }

    /// A row by id.
    #[tracing::instrument(name = "store.get_session", level = "debug", skip_all)]
    pub async fn get_session(&self, id: &str) -> Result<Option<SessionRecord>, WharfError> {
        let sql = format!("SELECT {COLUMNS} FROM wharf_sessions WHERE id = $1");
        self.fetch_optional(sqlx::query(&sql).bind(id), record)
            .await
    }

    /// The generation of a row (a cheap freshness check for caches).
    #[tracing::instrument(name = "store.session_generation", level = "debug", skip_all)]
    pub async fn session_generation(
        &self,
        id: &str,
    ) -> Result<Option<(u64, SessionState)>, WharfError> {
        let statement = sqlx::query("SELECT generation, state FROM wharf_sessions WHERE id = $1");
        self.fetch_optional(statement.bind(id), |row| {
            let generation: i64 = column(row, "generation")?;
            let state: String = column(row, "state")?;
            // A damaged row reads as a generation no cache holds, so it is re-read
            // (and refused) rather than trusted.
            Ok(
                match (
                    from_column(generation, u64::MAX),
                    SessionState::parse(&state),
                ) {
                    (Some(generation), Some(state)) => (generation, state),
                    _ => (u64::MAX, SessionState::Creating),
                },
            )
        })
        .await
    }

    /// Rows, optionally filtered by tenant, backend and key; a damaged row is logged and
    /// left out.
    #[tracing::instrument(name = "store.list_sessions", level = "debug", skip_all)]
    pub async fn list_sessions(
        &self,
        tenant: Option<&str>,
        backend: Option<&str>,
        key: Option<&str>,
    ) -> Result<Vec<SessionRecord>, WharfError> {
        let rows = self.list_session_rows(tenant, backend, key).await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                row.map_err(|bad| {
                    tracing::warn!(session = %bad.id, "skipped a damaged session row: {}", bad.reason)
                })
                .ok()
            })
            .collect())
    }

    /// Rows as decoded, a damaged one as what is wrong with it (for recovery's report).
    #[tracing::instrument(name = "store.list_session_rows", level = "debug", skip_all)]
    pub async fn list_session_rows(
        &self,
        tenant: Option<&str>,
        backend: Option<&str>,
        key: Option<&str>,
    ) -> Result<Vec<Result<SessionRecord, BadSessionRow>>, WharfError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM wharf_sessions
             WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR backend = $2) AND ($3 = '' OR skey = $3)
             ORDER BY created_at, id"
        );
        let statement = sqlx::query(&sql)
            .bind(tenant.unwrap_or(""))
            .bind(backend.unwrap_or(""))
            .bind(key.unwrap_or(""));
        self.fetch_all(statement, decode).await
    }

    /// Deletes a row (any state).
    #[tracing::instrument(name = "store.delete_session", level = "debug", skip_all)]
    pub async fn delete_session(&self, id: &str) -> Result<(), WharfError> {
        self.run(sqlx::query("DELETE FROM wharf_sessions WHERE id = $1").bind(id))
            .await
    }

    /// Deletes a row only if it is still at `generation` (nobody changed it since).
    #[tracing::instrument(name = "store.delete_session_at", level = "debug", skip_all)]
    pub async fn delete_session_at(&self, id: &str, generation: u64) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query("DELETE FROM wharf_sessions WHERE id = $1 AND generation = $2")
                .bind(id)
                .bind(to_column(generation)),
        )
        .await
    }

    /// Writes new session data if the row is still at `generation`; the new generation.
    #[tracing::instrument(name = "store.update_data", level = "debug", skip_all)]
    pub async fn update_data(
        &self,
        id: &str,
        generation: u64,
        data: &Value,
        now: i64,
    ) -> Result<Option<u64>, WharfError> {
        let changed = self.changed_one(sqlx::query(
            "UPDATE wharf_sessions SET data = $1, last_activity = $2, generation = generation + 1
             WHERE id = $3 AND generation = $4 AND state = 'ready'",
        )
        .bind(data.to_string())
        .bind(now)
        .bind(id)
        .bind(to_column(generation))).await?;
        Ok(changed.then_some(generation + 1))
    }

    /// Records activity (extends the idle TTL); false when the row is gone.
    #[tracing::instrument(name = "store.touch", level = "debug", skip_all)]
    pub async fn touch(&self, id: &str, now: i64) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "UPDATE wharf_sessions SET last_activity = $1 WHERE id = $2 AND state = 'ready'",
            )
            .bind(now)
            .bind(id),
        )
        .await
    }

    /// Sets the holder claim if it is free, expired or already this holder's, and the owner
    /// matches; true when claimed.
    #[tracing::instrument(name = "store.claim", level = "debug", skip_all)]
    pub async fn claim(
        &self,
        id: &str,
        owner: Option<&str>,
        holder: &str,
        until: i64,
        now: i64,
    ) -> Result<bool, WharfError> {
        self.changed_one(
            sqlx::query(
                "UPDATE wharf_sessions SET holder = $1, holder_until = $2
             WHERE id = $3 AND state IN ('ready', 'paused', 'archived')
               AND (owner IS NULL OR owner = $4)
               AND (holder IS NULL OR holder = $1 OR holder_until < $5)",
            )
            .bind(holder)
            .bind(until)
            .bind(id)
            .bind(owner.unwrap_or(""))
            .bind(now),
        )
        .await
    }

    /// Clears the holder claim if it is `holder`'s; true when cleared.
    #[tracing::instrument(name = "store.unclaim", level = "debug", skip_all)]
    pub async fn unclaim(&self, id: &str, holder: &str) -> Result<bool, WharfError> {
        self.changed_one(sqlx::query("UPDATE wharf_sessions SET holder = NULL, holder_until = 0 WHERE id = $1 AND holder = $2")
            .bind(id)
            .bind(holder)).await
    }
}
