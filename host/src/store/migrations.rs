//! Schema, created at open under a database lock (any number of nodes may start at once on
//! one database): the first tables (each statement idempotent), then the numbered steps
//! that came after, applied once each.

use super::StoreEngine;
use anyhow::{Context, Result};
use sqlx::{AnyConnection, Connection};

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

const STEPS_DONE: &str = "CREATE TABLE IF NOT EXISTS wharf_migrations (
    step TEXT PRIMARY KEY
)";

/// Changes after the first schema, applied once each in this order and recorded in
/// `wharf_migrations`. Append only: a released step never changes; new ones go last.
const STEPS: &[(&str, &str)] = &[
    (
        "0001_session_boot",
        "ALTER TABLE wharf_sessions ADD COLUMN boot TEXT NOT NULL DEFAULT ''",
    ),
    (
        "0002_node_boot",
        "ALTER TABLE wharf_nodes ADD COLUMN boot TEXT NOT NULL DEFAULT ''",
    ),
    (
        "0003_warm_sandboxes",
        "CREATE TABLE IF NOT EXISTS wharf_warm_sandboxes (
            id TEXT PRIMARY KEY,
            backend TEXT NOT NULL,
            handle TEXT,
            state TEXT NOT NULL,
            node TEXT NOT NULL,
            boot TEXT NOT NULL,
            taken_by TEXT,
            created_at BIGINT NOT NULL
        )",
    ),
    (
        "0004_session_paused_until",
        "ALTER TABLE wharf_sessions ADD COLUMN paused_until BIGINT",
    ),
    (
        "0005_snapshots",
        "CREATE TABLE IF NOT EXISTS wharf_snapshots (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            backend TEXT NOT NULL,
            name TEXT NOT NULL,
            image TEXT NOT NULL,
            origin TEXT NOT NULL,
            bytes BIGINT NOT NULL,
            state TEXT NOT NULL,
            node TEXT NOT NULL,
            boot TEXT NOT NULL,
            created_at BIGINT NOT NULL
        )",
    ),
    (
        "0006_volumes",
        "CREATE TABLE IF NOT EXISTS wharf_volumes (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            name TEXT NOT NULL,
            shared BIGINT NOT NULL,
            engine_volume TEXT NOT NULL,
            bytes BIGINT NOT NULL,
            measured_at BIGINT NOT NULL,
            state TEXT NOT NULL,
            node TEXT NOT NULL,
            boot TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            UNIQUE (tenant, name)
        )",
    ),
    (
        "0007_session_archive",
        "ALTER TABLE wharf_sessions ADD COLUMN archive TEXT",
    ),
    (
        "0008_snapshot_archive_of",
        "ALTER TABLE wharf_snapshots ADD COLUMN archive_of TEXT",
    ),
];

/// Any fixed number that is Wharf's own: the PostgreSQL advisory lock of the migration.
const MIGRATION_LOCK: i64 = 0x5748_4152_4600_0001;

/// Held by a node while it counts and creates a backend's containers (`backend_locks.rs`).
const BACKEND_LOCKS: &str = "CREATE TABLE IF NOT EXISTS wharf_backend_locks (
    backend TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    node TEXT NOT NULL,
    boot TEXT NOT NULL,
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

/// Creates the tables and applies the steps not yet applied (on SQLite, switching the file
/// to WAL first). Everything runs in one transaction on one connection of its own that
/// holds the database's migration lock (`BEGIN IMMEDIATE` on SQLite, a transaction-scoped
/// advisory lock on PostgreSQL), so nodes starting together migrate one after the other;
/// the connection is closed at the end, which also ends the lock if anything failed.
pub async fn run(url: &str, engine: StoreEngine) -> Result<()> {
    let mut attempt = 0;
    loop {
        let mut conn = AnyConnection::connect(url)
            .await
            .context("opening a connection for the migration")?;
        let outcome = migrate(&mut conn, engine).await;
        let _ = conn.close().await;
        attempt += 1;
        match outcome {
            // SQLite answers a journal-mode switch that races another opener with
            // SQLITE_BUSY at once, without its busy handler: wait and start over.
            Err(e)
                if engine == StoreEngine::Sqlite
                    && attempt < SQLITE_BUSY_ATTEMPTS
                    && format!("{e:#}").contains("database is locked") =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt)).await;
            }
            other => return other,
        }
    }
}

/// How many times a SQLite migration that found the file locked starts over.
const SQLITE_BUSY_ATTEMPTS: u64 = 20;

async fn migrate(conn: &mut AnyConnection, engine: StoreEngine) -> Result<()> {
    match engine {
        StoreEngine::Sqlite => {
            sqlx::query("PRAGMA journal_mode=WAL")
                .execute(&mut *conn)
                .await?;
            sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        }
        StoreEngine::Postgres => {
            sqlx::query("BEGIN").execute(&mut *conn).await?;
            // In FROM: the function returns `void`, which the `Any` driver cannot decode.
            sqlx::query(&format!(
                "SELECT 1 AS locked FROM pg_advisory_xact_lock({MIGRATION_LOCK})"
            ))
            .execute(&mut *conn)
            .await
            .context("taking the migration lock")?;
        }
    }
    match apply(conn, engine).await {
        Ok(()) => {
            sqlx::query("COMMIT").execute(&mut *conn).await?;
            Ok(())
        }
        Err(e) => {
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            Err(e)
        }
    }
}

async fn apply(conn: &mut AnyConnection, engine: StoreEngine) -> Result<()> {
    for statement in [
        SESSIONS.to_string(),
        NODES.to_string(),
        kv(engine),
        STEPS_DONE.to_string(),
        BACKEND_LOCKS.to_string(),
        "CREATE INDEX IF NOT EXISTS wharf_sessions_backend ON wharf_sessions (backend)".to_string(),
    ] {
        sqlx::query(&statement).execute(&mut *conn).await?;
    }
    for (step, statement) in STEPS {
        let done = sqlx::query("SELECT step FROM wharf_migrations WHERE step = $1")
            .bind(*step)
            .fetch_optional(&mut *conn)
            .await?;
        if done.is_some() {
            continue;
        }
        sqlx::query(statement)
            .execute(&mut *conn)
            .await
            .with_context(|| format!("migration step {step}"))?;
        sqlx::query("INSERT INTO wharf_migrations (step) VALUES ($1)")
            .bind(*step)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::store::StateStore;

    #[tokio::test]
    async fn stores_opened_together_on_a_fresh_file_all_open_and_steps_apply_once()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("fresh.db");
        let opened =
            futures::future::join_all((0..4).map(|_| StateStore::open_sqlite(&path))).await;
        for store in &opened {
            assert!(store.is_ok(), "{:?}", store.as_ref().err());
        }
        let store = StateStore::open_sqlite(&path).await?;
        let steps: Vec<(String,)> = sqlx::query_as("SELECT step FROM wharf_migrations")
            .fetch_all(store.pool())
            .await?;
        assert_eq!(steps.len(), super::STEPS.len());
        Ok(())
    }
}
