//! What the scrape-time gauges are set from: the front door reads it off the instance
//! pools, the session store and Docker when `/metrics` is scraped.

/// One backend's instance pool, as a scrape reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolCounts {
    /// Idle instances.
    pub idle: usize,
    /// Instances running a call.
    pub busy: usize,
    /// Instances discarded (trapped, poisoned) since start.
    pub discarded: u64,
    /// Instances retired (age, call count) since start.
    pub retired: u64,
}

/// What the scrape-time gauges show, read by the front door at scrape time.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// Loaded backends per contract version.
    pub contracts: Vec<(String, usize)>,
    /// Each loaded backend's pool.
    pub pools: Vec<(String, PoolCounts)>,
    /// (backend, state) of every session in the store; `None` when the store did not answer.
    pub sessions: Option<Vec<(String, &'static str)>>,
    /// The backend of every Wharf container; `None` when Docker did not answer.
    pub containers: Option<Vec<String>>,
    /// The tenant of every session in the store; `None` when the store did not answer.
    pub tenant_sessions: Option<Vec<String>>,
    /// The tenant of every Wharf container that belongs to a session.
    pub tenant_containers: Option<Vec<String>>,
    /// Each tenant's ready snapshots (tenant, count, bytes); `None` when the store did not
    /// answer.
    pub tenant_snapshots: Option<Vec<(String, u64, u64)>>,
    /// Each tenant's named volumes (tenant, count, bytes last measured); `None` when the
    /// store did not answer.
    pub tenant_volumes: Option<Vec<(String, u64, u64)>>,
}
