//! Compiled components on disk, so a restart or a re-dropped file does not recompile.
//!
//! An entry is keyed by the sha256 of the `.wasm` and the engine's
//! `precompile_compatibility_hash`; its own sha256 is kept beside it and checked before
//! the (unsafe) deserialize. A corrupt or mismatched entry is rebuilt. The directory is 0700, its files 0600.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::runtime::compile_worker::{self, WorkerOutcome};

/// Where a component came from: the cache, or a fresh compile (then stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Deserialized from a verified entry.
    Hit,
    /// Compiled, and stored for next time.
    Compiled,
    /// A corrupt entry was found, recompiled and replaced.
    Rebuilt,
}

/// The on-disk cache.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl CompileCache {
    /// Opens (creating, 0700) the cache directory.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    fn key(engine: &Engine, wasm: &[u8]) -> String {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        format!("{}-{:016x}", sha256_hex(wasm), h.finish())
    }

    /// Path of the artifact for these bytes on this engine.
    pub fn artifact_path(&self, engine: &Engine, wasm: &[u8]) -> PathBuf {
        self.dir.join(format!("{}.cwasm", Self::key(engine, wasm)))
    }

    /// Returns the compiled component, from the cache when a verified entry exists. A
    /// cold compile runs in a worker process when one is enabled
    /// ([`compile_worker`](crate::runtime::compile_worker)), else in this process.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
    ) -> Result<(Component, CacheOutcome)> {
        let artifact = self.artifact_path(engine, wasm);
        let outcome = match self.load(engine, &artifact) {
            Entry::Loaded(component) => return Ok((component, CacheOutcome::Hit)),
            Entry::Absent => CacheOutcome::Compiled,
            Entry::Unusable => CacheOutcome::Rebuilt,
        };
        if let Some(exe) = compile_worker::worker_exe() {
            match compile_worker::compile_in_child(exe, &self.dir, wasm) {
                WorkerOutcome::Stored => match self.load(engine, &artifact) {
                    Entry::Loaded(component) => return Ok((component, outcome)),
                    _ => tracing::warn!(
                        "the compile worker's artifact {} is unusable; compiling in-process",
                        artifact.display()
                    ),
                },
                WorkerOutcome::Refused(reason) => {
                    return Err(anyhow::anyhow!(reason));
                }
                WorkerOutcome::Unavailable(why) => {
                    tracing::warn!("compile worker unavailable ({why}); compiling in-process")
                }
            }
        }
        let compiled = precompile(engine, wasm)?;
        let component = deserialize(engine, &compiled)?;
        if let Err(err) = self.store(engine, wasm, &compiled) {
            tracing::warn!(
                "could not write compile cache entry {}: {err:#}",
                artifact.display()
            );
        }
        Ok((component, outcome))
    }

    /// The verified entry for `artifact`, if there is one.
    fn load(&self, engine: &Engine, artifact: &Path) -> Entry {
        let digest_path = artifact.with_extension("sha256");
        let (Ok(bytes), Ok(digest)) = (
            std::fs::read(artifact),
            std::fs::read_to_string(&digest_path),
        ) else {
            return Entry::Absent;
        };
        if sha256_hex(&bytes) != digest.trim() {
            tracing::warn!(
                "compile cache entry {} failed its digest check; rebuilding",
                artifact.display()
            );
            return Entry::Unusable;
        }
        match deserialize(engine, &bytes) {
            Ok(component) => Entry::Loaded(component),
            Err(err) => {
                tracing::warn!(
                    "compile cache entry {} unusable: {err:#}",
                    artifact.display()
                );
                Entry::Unusable
            }
        }
    }

    /// Stores `compiled` (the output of [`precompile`] for `wasm` on `engine`) with its digest.
    pub fn store(&self, engine: &Engine, wasm: &[u8], compiled: &[u8]) -> Result<()> {
        let artifact = self.artifact_path(engine, wasm);
        let digest_path = artifact.with_extension("sha256");
        let tmp = tempfile_in(&self.dir)?;
        crate::private_files::write_private(&tmp, compiled)?;
        std::fs::rename(&tmp, &artifact)?;
        let tmp = tempfile_in(&self.dir)?;
        crate::private_files::write_private(&tmp, sha256_hex(compiled).as_bytes())?;
        std::fs::rename(&tmp, digest_path)?;
        Ok(())
    }
}

/// What the cache holds for one component.
enum Entry {
    Loaded(Component),
    Absent,
    Unusable,
}

/// Compiles a component to the bytes the cache stores.
pub fn precompile(engine: &Engine, wasm: &[u8]) -> Result<Vec<u8>> {
    engine
        .precompile_component(wasm)
        .map_err(anyhow::Error::from)
        .context("compiling the component")
}

fn tempfile_in(dir: &Path) -> Result<PathBuf> {
    Ok(dir.join(format!(".tmp-{}", uuid::Uuid::new_v4().simple())))
}

/// Deserializes bytes this process produced with `precompile_component` or read from a
/// cache entry whose digest was just verified in a directory only this user can write.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, bytes: &[u8]) -> Result<Component> {
    // SAFETY: the bytes are either fresh output of `Engine::precompile_component` on this
    // engine, or a cache entry keyed by this engine's compatibility hash whose sha256 was
    // checked against the digest written with it; wasmtime also validates the header.
    unsafe { Component::deserialize(engine, bytes) }.map_err(anyhow::Error::from)
}

/// The worker's side (`wharf compile-worker`, see `compile_worker`): reads a component from stdin, compiles it with the host's engine
/// settings and stores it in the cache at `cache_dir`. A component that does not compile
/// exits with [`compile_worker::EXIT_COMPILE_ERROR`] and the reason on stderr.
pub fn run_worker(cache_dir: &Path) -> Result<()> {
    let mut wasm = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut wasm)
        .context("reading the component from stdin")?;
    let engine = crate::runtime::WharfEngine::new()?;
    let cache = CompileCache::open(cache_dir)?;
    let compiled = match precompile(engine.engine(), &wasm) {
        Ok(compiled) => compiled,
        Err(err) => {
            eprintln!("{err:#}");
            std::process::exit(compile_worker::EXIT_COMPILE_ERROR);
        }
    };
    cache.store(engine.engine(), &wasm, &compiled)
}
