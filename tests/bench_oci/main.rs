//! Backends from OCI registries: the first pull + verify (signature) + compile of the echo
//! backend, and the load of an already-cached OCI backend at a restart against the same
//! component from a local file. A real registry (`docker-registry`) on loopback; samples
//! alternate between the variants, each on a fresh host over the same warm data dir.

use std::path::Path;
use std::time::{Duration, Instant};
use wharf::Wharf;
use wharf::config::{BackendConfig, OciSettings, ServerConfig};
use wharf_integration_tests::registry::{LocalRegistry, echo_file, wharf_cli};

const SAMPLES: usize = 30;

fn server(data_dir: &Path, oci: &OciSettings) -> ServerConfig {
    ServerConfig {
        data_dir: data_dir.to_path_buf(),
        oci: oci.clone(),
        ..ServerConfig::default()
    }
}

/// One load of `path` on a fresh host over `data_dir`, timed.
async fn load(data_dir: &Path, oci: &OciSettings, path: &str, signed: bool) -> Duration {
    let wharf = Wharf::new(server(data_dir, oci)).await.expect("host");
    let mut config = BackendConfig::at(path);
    config.require_signature = signed;
    let started = Instant::now();
    wharf.load_backend("echo", config).await.expect("loads");
    let took = started.elapsed();
    wharf.shutdown().await;
    took
}

fn p50(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let Some(mut registry) = LocalRegistry::start() else {
        eprintln!("bench_oci: docker-registry is not installed; skipped");
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let file = echo_file(dir.path());
    let file_path = file.to_str().expect("utf8").to_string();
    let tag = registry.reference("bench/echo:1");
    let pinned = wharf_cli(&["push", &file_path, &tag]);
    wharf_cli(&["keygen", dir.path().join("k").to_str().expect("utf8")]);
    wharf_cli(&[
        "sign",
        "--key",
        dir.path().join("k.key").to_str().expect("utf8"),
        &tag,
    ]);
    let oci = OciSettings {
        signature_keys: vec![dir.path().join("k.pub").display().to_string()],
        ..OciSettings::default()
    };

    // First pull + verify + compile: a fresh data dir each time (nothing cached, cold
    // compile), against a cold compile of the local file.
    let mut first_oci = Vec::new();
    let mut first_file = Vec::new();
    for i in 0..3 {
        let fresh = dir.path().join(format!("cold-oci-{i}"));
        first_oci.push(load(&fresh, &oci, &tag, true).await);
        let fresh = dir.path().join(format!("cold-file-{i}"));
        first_file.push(load(&fresh, &oci, &file_path, false).await);
    }

    // Restart loads over a warm data dir (compile cache and OCI cache filled).
    let warm = dir.path().join("warm");
    load(&warm, &oci, &tag, true).await;
    load(&warm, &oci, &file_path, false).await;
    let (mut by_file, mut by_digest, mut by_tag, mut by_tag_signed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        by_file.push(load(&warm, &oci, &file_path, false).await);
        by_digest.push(load(&warm, &oci, &pinned, false).await);
        by_tag.push(load(&warm, &oci, &tag, false).await);
        by_tag_signed.push(load(&warm, &oci, &tag, true).await);
    }
    registry.stop();
    let mut offline = Vec::new();
    let mut offline_file = Vec::new();
    for _ in 0..SAMPLES {
        offline_file.push(load(&warm, &oci, &file_path, false).await);
        offline.push(load(&warm, &oci, &tag, true).await);
    }

    let file_ms = p50(by_file);
    println!("| OCI backend measure (echo, p50 of {SAMPLES} unless said) | figure |");
    println!("|---|---|");
    println!(
        "| first pull + signature check + cold compile (median of 3) | {:.1} ms |",
        p50(first_oci)
    );
    println!(
        "| cold compile of the same local file (median of 3) | {:.1} ms |",
        p50(first_file)
    );
    println!("| restart load, local file | {file_ms:.2} ms |");
    for (label, samples) in [
        ("restart load, oci by digest (cache only)", by_digest),
        (
            "restart load, oci by tag (registry up: tag resolved)",
            by_tag,
        ),
        ("restart load, oci by tag + signature check", by_tag_signed),
    ] {
        let ms = p50(samples);
        println!("| {label} | {ms:.2} ms (+{:.2} ms) |", ms - file_ms);
    }
    let file_ms = p50(offline_file);
    let ms = p50(offline);
    println!("| restart load, registry stopped: local file | {file_ms:.2} ms |");
    println!(
        "| restart load, registry stopped: oci by tag + signature, from the cache | {ms:.2} ms (+{:.2} ms) |",
        ms - file_ms
    );
    println!("\ntarget: a cached OCI backend loads within 20 ms of a local file");
}
