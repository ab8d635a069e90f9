//! One wasmtime `Engine` for the process: component model, async, pooling allocator,
//! epoch interruption driven by a ticker thread.

use anyhow::Result;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances; a spinning guest yields to the executor this often.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine plus the ticker that advances its epoch; the ticker stops when this is dropped.
pub struct WharfEngine {
    engine: Engine,
    ticker_stop: Arc<AtomicBool>,
}

/// The largest linear memory any instance may have; per-backend limits sit below it.
pub const MAX_MEMORY_BYTES: u64 = 1 << 30;

fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    config
}

impl WharfEngine {
    /// Builds the engine with the pooling allocator, falling back to on-demand allocation
    /// where the machine refuses the pool's address-space reservation.
    pub fn new() -> Result<Self> {
        let mut pooled = base_config();
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(512)
            .total_core_instances(2048)
            .total_memories(512)
            .total_tables(1024)
            .total_stacks(512)
            .max_memory_size(MAX_MEMORY_BYTES as usize)
            .max_memories_per_component(4)
            .max_core_instances_per_component(32)
            .max_tables_per_component(8);
        pooled.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = match Engine::new(&pooled) {
            Ok(engine) => engine,
            Err(err) => {
                tracing::warn!(
                    "pooling allocator unavailable ({err:#}); allocating instances on demand"
                );
                Engine::new(&base_config())?
            }
        };
        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (ticking, stop) = (engine.clone(), ticker_stop.clone());
        std::thread::Builder::new()
            .name("wharf-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticking.increment_epoch();
                }
            })?;
        Ok(Self {
            engine,
            ticker_stop,
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl Drop for WharfEngine {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}
