//! Session store benchmark, SQLite and PostgreSQL side by side: acquire of an existing
//! session (cache hit on this node, and cold from the store on a fresh node), and 1,000
//! sessions of a non-container backend created and listed. Run with `scripts/bench`.

use serde_json::json;
use std::time::{Duration, Instant};
use wharf::Wharf;
use wharf::config::ServerConfig;
use wharf::front_door::{ANONYMOUS_TENANT, SessionRequest};
use wharf_integration_tests::bundled;

fn request(key: &str) -> SessionRequest {
    serde_json::from_value(json!({"backend": "scratchpad", "key": key})).unwrap()
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

async fn host(store: &str, dir: &std::path::Path) -> std::sync::Arc<Wharf> {
    let wharf = Wharf::new(ServerConfig {
        data_dir: dir.to_path_buf(),
        store_url: Some(store.to_string()),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    wharf
        .load_backend("scratchpad", bundled("scratchpad"))
        .await
        .unwrap();
    wharf
}

async fn measure(engine: &str, store: String) -> Vec<(String, String)> {
    let a_dir = tempfile::tempdir().unwrap();
    let a = host(&store, a_dir.path()).await;
    let mut rows = Vec::new();

    let (hot, _) = a
        .create_session(ANONYMOUS_TENANT, request("hot"))
        .await
        .unwrap();
    // What the cache hit spends on its one store read (the generation check).
    let direct = wharf::store::StateStore::open(&store).await.unwrap();
    let mut reads = Vec::new();
    for _ in 0..500 {
        let t = Instant::now();
        direct.session_generation(&hot.id).await.unwrap();
        reads.push(t.elapsed());
    }
    let mut hits = Vec::new();
    for _ in 0..500 {
        let t = Instant::now();
        let (_, created) = a
            .create_session(ANONYMOUS_TENANT, request("hot"))
            .await
            .unwrap();
        hits.push(t.elapsed());
        assert!(!created);
    }
    rows.push((
        format!("{engine}: acquire existing, cache hit (p50)"),
        format!("{:.3} ms", p50(hits)),
    ));
    rows.push((
        format!("{engine}: of which the generation read alone (p50)"),
        format!("{:.3} ms", p50(reads)),
    ));

    // Cold: every acquire on a fresh node that has never seen the session (discover runs).
    let mut colds = Vec::new();
    for i in 0..30 {
        a.create_session(ANONYMOUS_TENANT, request(&format!("cold-{i}")))
            .await
            .unwrap();
    }
    let b_dir = tempfile::tempdir().unwrap();
    let b = host(&store, b_dir.path()).await;
    for i in 0..30 {
        let t = Instant::now();
        let (_, created) = b
            .create_session(ANONYMOUS_TENANT, request(&format!("cold-{i}")))
            .await
            .unwrap();
        colds.push(t.elapsed());
        assert!(!created);
    }
    rows.push((
        format!("{engine}: acquire existing, cold from the store + discover (p50)"),
        format!("{:.3} ms", p50(colds)),
    ));

    let t = Instant::now();
    for i in 0..1000 {
        a.create_session(ANONYMOUS_TENANT, request(&format!("many-{i}")))
            .await
            .unwrap();
    }
    let created = t.elapsed();
    let t = Instant::now();
    let listed = a
        .sessions(
            &wharf::tenant::Tenant::own(ANONYMOUS_TENANT),
            Some("scratchpad"),
            None,
        )
        .await
        .unwrap();
    let list_time = t.elapsed();
    assert!(listed.len() >= 1000);
    rows.push((
        format!("{engine}: 1,000 sessions created (initialize included)"),
        format!(
            "{:.0} ms ({:.0}/s)",
            created.as_secs_f64() * 1e3,
            1000.0 / created.as_secs_f64()
        ),
    ));
    rows.push((
        format!("{engine}: list {} sessions", listed.len()),
        format!("{:.1} ms", list_time.as_secs_f64() * 1e3),
    ));
    rows
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rows = rt.block_on(measure(
        "SQLite",
        format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("bench.db").display()
        ),
    ));
    match std::env::var("WHARF_TEST_POSTGRES_URL") {
        Ok(_) => {
            let pg = wharf_integration_tests::processes::fresh_postgres().unwrap();
            rows.extend(rt.block_on(measure("PostgreSQL", pg)));
        }
        Err(_) => eprintln!("PostgreSQL rows skipped: set WHARF_TEST_POSTGRES_URL"),
    }
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(10);
    println!("| {:width$} | figure |", "session store measure");
    println!("|{}|---|", "-".repeat(width + 2));
    for (k, v) in &rows {
        println!("| {k:width$} | {v} |");
    }
    println!("\ntargets: cache hit <= 0.2 ms p50; cold adopt <= 5 ms plus the provider's discover");
}
