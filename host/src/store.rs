//! The state store: sessions, nodes and backend key-value state, behind one type that runs
//! on two engines through sqlx's `Any` driver — an embedded SQLite file by default (WAL,
//! zero set-up) and PostgreSQL for several Wharf nodes sharing sessions. Migrations run at
//! open. No call ever holds a transaction across a backend call: every operation here is one
//! short statement (compare-and-set where it matters).

mod backend_locks;
mod kv_rows;
mod made_rows;
mod migrations;
mod node_rows;
mod quota_rows;
mod session_archives;
mod session_leases;
mod session_pauses;
mod session_rows;
mod snapshot_rows;
mod volume_rows;
mod warm_rows;

pub use crate::engines::kv::KvScope;
pub use crate::session_record::{SessionRecord, SessionState};
pub use quota_rows::RowQuota;
pub use session_pauses::PauseCap;
pub use session_rows::BadSessionRow;
pub use volume_rows::VolumeInsert;
pub use warm_rows::WarmRow;

use crate::bounded::from_column;
use crate::error_code::{Code, WharfError};
use anyhow::{Context, Result};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::path::Path;
use std::time::Duration;

/// Which engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreEngine {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// The store. Each opening is one incarnation of its process: the rows it leases carry
/// its boot id (beside the node id), so a restarted node knows its earlier leases are dead.
#[derive(Debug, Clone)]
pub struct StateStore {
    pool: AnyPool,
    engine: StoreEngine,
    boot: std::sync::Arc<str>,
}

/// A store failure as the API sees it: a dependency is down (5012), retryable.
pub fn unavailable(err: impl std::fmt::Display) -> WharfError {
    WharfError::new(
        Code::DependencyFailure,
        format!("the state store is unavailable: {err}"),
    )
    .retryable(true)
}

impl StateStore {
    /// Opens `url`: `sqlite://PATH` or `postgres://…`. Runs migrations.
    pub async fn open(url: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let engine = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            StoreEngine::Postgres
        } else if url.starts_with("sqlite:") {
            StoreEngine::Sqlite
        } else {
            anyhow::bail!("unsupported store URL `{url}`: use sqlite://PATH or postgres://…");
        };
        let max = if engine == StoreEngine::Sqlite { 4 } else { 16 };
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(Duration::from_secs(3))
            // A ping before every checkout doubles each query's round trips; sqlx still
            // pings on release, so a connection that broke (a store restart) fails one
            // query with a retryable 5012 and is then closed.
            .test_before_acquire(false)
            .connect(url)
            .await
            .with_context(|| format!("connecting to the state store {}", redact_url(url)))?;
        migrations::run(url, engine)
            .await
            .context("migrating the state store")?;
        let boot = format!("boot_{}", uuid::Uuid::new_v4().simple()).into();
        Ok(Self { pool, engine, boot })
    }

    /// Opens (creating) the embedded SQLite store at `path`.
    /// The file is 0600 before SQLite opens it, so its `-wal` and `-shm` files (which
    /// SQLite creates with the database's mode) are too.
    pub async fn open_sqlite(path: &Path) -> Result<Self> {
        crate::private_files::ensure_private(path)?;
        let store = Self::open(&format!("sqlite://{}?mode=rwc", path.display())).await?;
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            crate::private_files::restrict_if_present(Path::new(&side))?;
        }
        Ok(store)
    }

    /// The engine.
    pub fn engine(&self) -> StoreEngine {
        self.engine
    }

    /// This incarnation's boot id, new at every opening.
    pub fn boot(&self) -> &str {
        &self.boot
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Runs `statement`, whatever it changes.
    pub(crate) async fn run<'q>(&self, statement: Statement<'q>) -> Result<(), WharfError> {
        statement.execute(self.pool()).await.map_err(unavailable)?;
        Ok(())
    }

    /// Runs `statement`; true when it changed exactly one row (a compare-and-set took).
    pub(crate) async fn changed_one<'q>(
        &self,
        statement: Statement<'q>,
    ) -> Result<bool, WharfError> {
        let done = statement.execute(self.pool()).await.map_err(unavailable)?;
        Ok(done.rows_affected() == 1)
    }

    /// `sql` with `node`, this incarnation's boot id and `before_ms` bound as `$1`, `$2`
    /// and `$3`: a sweep's "made by `node` in an earlier incarnation, or before".
    pub(crate) fn of_node_before<'q>(
        &'q self,
        sql: &'q str,
        node: &'q str,
        before_ms: u64,
    ) -> Statement<'q> {
        sqlx::query(sql)
            .bind(node)
            .bind(self.boot())
            .bind(crate::bounded::to_column(before_ms))
    }

    /// Runs the query `statement` and reads the row it finds, if any, with `read`.
    pub(crate) async fn fetch_optional<'q, T>(
        &self,
        statement: Statement<'q>,
        read: impl FnOnce(&AnyRow) -> Result<T, WharfError>,
    ) -> Result<Option<T>, WharfError> {
        let row = statement
            .fetch_optional(self.pool())
            .await
            .map_err(unavailable)?;
        row.as_ref().map(read).transpose()
    }

    /// Runs the query `statement` and reads every row it finds with `read`, in order.
    pub(crate) async fn fetch_all<'q, T, C: FromIterator<T>>(
        &self,
        statement: Statement<'q>,
        read: impl FnMut(&AnyRow) -> Result<T, WharfError>,
    ) -> Result<C, WharfError> {
        let rows = statement
            .fetch_all(self.pool())
            .await
            .map_err(unavailable)?;
        rows.iter().map(read).collect()
    }
}

/// One statement of either engine, its arguments bound.
pub(crate) type Statement<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Column `name` of `row`; a column that cannot be read is the store's failure (5012).
pub(crate) fn column<'r, T>(row: &'r AnyRow, name: &str) -> Result<T, WharfError>
where
    T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    row.try_get(name).map_err(unavailable)
}

/// The columns of a row of one kind of record (`what`: "snapshot", "volume"), each number
/// checked against its bound: nothing read back from the store is trusted more than a
/// request.
pub(crate) struct Columns<'r> {
    row: &'r AnyRow,
    what: &'static str,
}

impl<'r> Columns<'r> {
    /// The columns of `row`, a `what`'s.
    pub(crate) fn of(row: &'r AnyRow, what: &'static str) -> Self {
        Self { row, what }
    }

    /// Column `name`, as it is stored.
    pub(crate) fn get<T>(&self, name: &str) -> Result<T, WharfError>
    where
        T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
    {
        column(self.row, name)
    }

    /// Column `name`, a count, a size or a time: 0 to `i64::MAX`.
    pub(crate) fn number(&self, name: &str) -> Result<u64, WharfError> {
        let v: i64 = self.get(name)?;
        from_column(v, i64::MAX as u64)
            .ok_or_else(|| WharfError::internal(format!("a {}'s `{name}` is {v}", self.what)))
    }

    /// The `state` column, as `parse` reads its word.
    pub(crate) fn state<S>(&self, parse: fn(&str) -> Option<S>) -> Result<S, WharfError> {
        let word: String = self.get("state")?;
        parse(&word)
            .ok_or_else(|| WharfError::internal(format!("a {}'s state is {word:?}", self.what)))
    }
}

/// Binds the tenant filter `($1 = '' OR tenant = $2)` of a listing: `tenant`'s rows, or
/// every tenant's with `None`.
pub(crate) fn of_tenant<'q>(statement: Statement<'q>, tenant: Option<&'q str>) -> Statement<'q> {
    statement
        .bind(if tenant.is_some() { "t" } else { "" })
        .bind(tenant.unwrap_or_default())
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact_url(url: &str) -> String {
    crate::redact::url_credentials(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new store in a new temporary directory, with its file's path (to open it again as
    /// a restarted node does); the directory lives as long as the first of the three.
    pub(super) async fn fresh_store()
    -> anyhow::Result<(tempfile::TempDir, std::path::PathBuf, StateStore)> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("s.db");
        let store = StateStore::open_sqlite(&path).await?;
        Ok((dir, path, store))
    }

    /// `ids`, sorted: a test does not rely on the order rows come in.
    pub(super) fn sorted<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        let mut ids: Vec<&str> = ids.into_iter().collect();
        ids.sort();
        ids
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://wharf:s3cret@db:5432/wharf"),
            "postgres://wharf:***@db:5432/wharf"
        );
        assert_eq!(redact_url("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }
}
