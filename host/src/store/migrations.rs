//! Schema, created at open; each statement is idempotent.

use super::{StateStore, StoreEngine};
use anyhow::Result;

const SESSIONS: &str = "CREATE TABLE IF NOT EXISTS wharf_sessions (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    backend TEXT NOT NULL,
    skey TEXT NOT NULL,
    state TEXT NOT NULL,
    data TEXT NOT NULL,
    owner TEXT,
    holder TEXT,
    holder_until BIGINT NOT NULL DEFAULT 0,
    plugin_version TEXT NOT NULL DEFAULT '',
    node TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    last_activity BIGINT NOT NULL,
    idle_ttl BIGINT NOT NULL,
    max_expires_at BIGINT,
    generation BIGINT NOT NULL,
    UNIQUE (tenant, backend, skey)
)";

const NODES: &str = "CREATE TABLE IF NOT EXISTS wharf_nodes (
    id TEXT PRIMARY KEY,
    lease_until BIGINT NOT NULL,
    started_at BIGINT NOT NULL
)";

/// Held by a node while it counts and creates a backend's containers (`backend_locks.rs`).
const BACKEND_LOCKS: &str = "CREATE TABLE IF NOT EXISTS wharf_backend_locks (
    backend TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    lease_until BIGINT NOT NULL
)";

fn kv(engine: StoreEngine) -> String {
    let blob = match engine {
        StoreEngine::Sqlite => "BLOB",
        StoreEngine::Postgres => "BYTEA",
    };
    format!(
        "CREATE TABLE IF NOT EXISTS wharf_kv (
            backend TEXT NOT NULL,
            scope TEXT NOT NULL,
            k TEXT NOT NULL,
            v {blob} NOT NULL,
            PRIMARY KEY (backend, scope, k)
        )"
    )
}

/// Creates the tables (and, on SQLite, switches the file to WAL).
pub async fn run(store: &StateStore) -> Result<()> {
    if store.engine == StoreEngine::Sqlite {
        sqlx::query("PRAGMA journal_mode=WAL")
            .execute(store.pool())
            .await?;
    }
    for statement in [SESSIONS.to_string(), NODES.to_string(), kv(store.engine)] {
        sqlx::query(&statement).execute(store.pool()).await?;
    }
    sqlx::query("CREATE INDEX IF NOT EXISTS wharf_sessions_backend ON wharf_sessions (backend)")
        .execute(store.pool())
        .await?;
    sqlx::query(BACKEND_LOCKS).execute(store.pool()).await?;
    Ok(())
}
