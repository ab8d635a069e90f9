//! The compile cache: a restart does not recompile, a corrupt entry is rebuilt, and a
//! component built against an unknown WIT version is refused with the version named.

use std::sync::Arc;
use wharf::Wharf;
use wharf::config::ServerConfig;
use wharf::runtime::compile_cache::CacheOutcome;
use wharf_integration_tests::bundled;

fn server(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        data_dir: dir.to_path_buf(),
        ..ServerConfig::default()
    }
}

#[tokio::test]
async fn a_restart_hits_the_cache_and_a_corrupt_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let first = Wharf::new(server(dir.path())).await.unwrap();
    let b = first.load_backend("echo", bundled("echo")).await.unwrap();
    assert_eq!(b.cache, CacheOutcome::Compiled);
    drop(first);

    let cache_dir = dir.path().join("compile-cache");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cache_dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the cache directory is private");
    }

    let second = Wharf::new(server(dir.path())).await.unwrap();
    let b = second.load_backend("echo", bundled("echo")).await.unwrap();
    assert_eq!(b.cache, CacheOutcome::Hit);
    assert!(b.description.tools.iter().any(|t| t.action == "say"));

    // Flip bytes in the artifact: the digest check catches it, the entry is rebuilt.
    let artifact = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap();
    let mut bytes = std::fs::read(&artifact).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&artifact, bytes).unwrap();
    let third = Wharf::new(server(dir.path())).await.unwrap();
    let b = third.load_backend("echo", bundled("echo")).await.unwrap();
    assert_eq!(b.cache, CacheOutcome::Rebuilt);
    let caller = wharf::principal::Principal::unrestricted("anonymous");
    let r = third
        .invoke(wharf::front_door::Invocation::new(
            &caller,
            "echo:ping",
            serde_json::json!({}),
            wharf::api::call_request::missing_session,
        ))
        .await
        .unwrap();
    assert_eq!(r.result.content, "pong");
    let fourth = Wharf::new(server(dir.path())).await.unwrap();
    assert_eq!(
        fourth
            .load_backend("echo", bundled("echo"))
            .await
            .unwrap()
            .cache,
        CacheOutcome::Hit
    );
}

#[tokio::test]
async fn unknown_wit_versions_and_garbage_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let wharf = Wharf::new(server(dir.path())).await.unwrap();
    let future = wat::parse_str(
        r#"(component
             (core module $m (func (export "f")))
             (core instance $i (instantiate $m))
             (func $f (canon lift (core func $i "f")))
             (instance $api (export "describe" (func $f)))
             (export "wharf:plugin/backend@0.9.0" (instance $api)))"#,
    )
    .unwrap();
    let err = wharf
        .load_backend_bytes("future", Arc::new(future), bundled("echo"))
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("wharf:plugin@0.9.0"), "{err:#}");

    let err = wharf
        .load_backend_bytes(
            "junk",
            Arc::new(b"not wasm at all".to_vec()),
            bundled("echo"),
        )
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("compiling"), "{err:#}");
    assert!(wharf.backends().is_empty());
}
