//! Files through the sandbox agent (issue 41, docs/agents.md "Files"), against a real
//! host, real Docker and docker-provider sandboxes: a directory tree with symlinks, odd
//! names and 100 MB of data goes out as a tar stream and back in, streamed (the host's
//! memory does not grow by the tree's size); hostile archives are refused with nothing
//! written outside their directory; `files/info`, `files/list` and a recursive watch answer
//! as the sandbox's user; another tenant gets 4007 for every route.

use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use wharf_integration_tests::tenant_client::TenantClient;
use wharf_integration_tests::{
    TestHost, command_text, docker_host_for, docker_ready, raw_http_reply,
    remove_backend_containers,
};

const ALICE: &str = "alice-files-token";
const BOB: &str = "bob-files-token";

async fn host(backend: &str) -> TestHost {
    docker_host_for(backend, &[("alice", ALICE), ("bob", BOB)]).await
}

/// The tenant's client: `ALICE` or `BOB`.
fn as_tenant<'a>(h: &'a TestHost, token: &'a str) -> TenantClient<'a> {
    TenantClient { url: &h.url, token }
}

async fn get(h: &TestHost, bearer: &str, path: &str) -> Value {
    as_tenant(h, bearer).get(path).await
}

async fn new_session(h: &TestHost, backend: &str, config: Value) -> String {
    let created = as_tenant(h, ALICE)
        .post(
            "/v1/sessions",
            json!({"backend": backend, "config": config}),
        )
        .await;
    assert_eq!(created["code"], 0, "{created}");
    created["data"]["id"].as_str().expect("an id").to_string()
}

/// Runs `script` in the session's sandbox; its stdout (stderr appended).
async fn run(h: &TestHost, backend: &str, session: &str, script: &str) -> String {
    let reply = as_tenant(h, ALICE)
        .post(
            "/v1/call",
            json!({"tool": format!("{backend}:run_command"), "args": {"command": script, "timeout_seconds": 120}, "session_id": session}),
        )
        .await;
    assert_eq!(reply["code"], 0, "{script}: {reply}");
    command_text(&reply["data"]["result"])
}

/// This process's resident memory, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// Samples [`rss_kib`] every 20 ms until dropped; the peak.
fn rss_peak() -> (
    tokio::task::JoinHandle<u64>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut peak = rss_kib();
        while stopped.try_recv().is_err() {
            peak = peak.max(rss_kib());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        peak
    });
    (task, stop)
}

/// Downloads `path` of the session to `file`, chunk by chunk; the status and content type.
async fn download(
    h: &TestHost,
    bearer: &str,
    session: &str,
    path: &str,
    file: &Path,
) -> (u16, String) {
    let mut response = reqwest::Client::new()
        .get(format!("{}/v1/sessions/{session}/files?path={path}", h.url))
        .bearer_auth(bearer)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let mut out = tokio::fs::File::create(file).await.unwrap();
    while let Some(chunk) = response.chunk().await.unwrap() {
        out.write_all(&chunk).await.unwrap();
    }
    out.flush().await.unwrap();
    (status, kind)
}

/// Uploads `file` as a tar stream into directory `path`, streamed from disk over a raw
/// HTTP/1.1 connection (the client holds none of it); the status and envelope.
async fn upload_tar(h: &TestHost, session: &str, path: &str, file: &Path) -> (u16, Value) {
    let len = std::fs::metadata(file).unwrap().len();
    let mut stream = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    let head = format!(
        "PUT /v1/sessions/{session}/files?path={path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {ALICE}\r\nContent-Type: application/x-tar\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n",
        h.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut body = tokio::fs::File::open(file).await.unwrap();
    tokio::io::copy(&mut body, &mut stream).await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    let (status, envelope) = raw_http_reply(&reply);
    (status, envelope)
}

/// A tar stream of one entry whose raw name (and link name) is written as given.
fn raw_entry(name: &str, kind: u8, link: &str, data: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    header[..name.len()].copy_from_slice(name.as_bytes());
    header[100..107].copy_from_slice(b"0000644");
    header[108..115].copy_from_slice(b"0000000");
    header[116..123].copy_from_slice(b"0000000");
    header[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
    header[136..147].copy_from_slice(b"00000000000");
    header[156] = kind;
    header[157..157 + link.len()].copy_from_slice(link.as_bytes());
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut out = header.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn archive(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out: Vec<u8> = entries.concat();
    out.extend_from_slice(&[0u8; 1024]);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_goes_out_and_back_in_as_tar_streamed_and_hostile_archives_are_refused() {
    if !docker_ready() {
        return;
    }
    let backend = "dirs";
    remove_backend_containers(backend);
    let h = host(backend).await;
    let s = new_session(&h, backend, json!({})).await;
    let made = run(
        &h,
        backend,
        &s,
        "set -e; mkdir -p tree/sub/deep tree/empty; \
         dd if=/dev/urandom of=tree/sub/deep/big.bin bs=1048576 count=100 2>/dev/null; \
         printf x > 'tree/odd name $(x) \u{e9}'; printf y > \"tree/sub/$(printf 'new\\nline')\"; \
         ln -s ../odd tree/sub/link; ln -s /etc tree/out; \
         sha256sum tree/sub/deep/big.bin | cut -d' ' -f1",
    )
    .await;
    let big_sha = made.trim().to_string();
    assert_eq!(big_sha.len(), 64, "{made}");

    // Out: a tar stream, read while the host streams it; its memory does not take the tree.
    let dir = tempfile::tempdir().unwrap();
    let tar_file = dir.path().join("tree.tar");
    let before = rss_kib();
    let (peak, stop) = rss_peak();
    let (status, kind) = download(&h, ALICE, &s, "tree", &tar_file).await;
    let _ = stop.send(());
    let peak = peak.await.unwrap();
    assert_eq!((status, kind.as_str()), (200, "application/x-tar"));
    eprintln!(
        "tar out of 100 MB: {} bytes; this process's RSS {before} KiB before, peak {peak} KiB",
        std::fs::metadata(&tar_file).unwrap().len()
    );
    assert!(
        peak.saturating_sub(before) < 48 * 1024,
        "the host's memory grew by {} KiB streaming a 100 MB tree",
        peak - before
    );
    let mut names = Vec::new();
    let mut tar = tar::Archive::new(std::fs::File::open(&tar_file).unwrap());
    for entry in tar.entries().unwrap() {
        let entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let link = entry
            .link_name()
            .unwrap()
            .map(|l| l.to_string_lossy().into_owned());
        names.push((name, link, entry.header().size().unwrap()));
    }
    let find = |n: &str| names.iter().find(|(name, ..)| name == n).cloned();
    assert_eq!(find("sub/deep/big.bin").map(|e| e.2), Some(100 << 20));
    assert_eq!(
        find("out").and_then(|e| e.1),
        Some("/etc".to_string()),
        "{names:?}"
    );
    assert!(find("odd name $(x) \u{e9}").is_some(), "{names:?}");
    assert!(find("sub/new\nline").is_some(), "{names:?}");
    assert!(find("empty").is_some(), "{names:?}");
    // The link to /etc is a link: nothing of /etc is in the stream.
    assert!(
        !names.iter().any(|(n, ..)| n.starts_with("out/")),
        "{names:?}"
    );

    // Back in, into a new directory: streamed from the client's disk, spooled by the host.
    let before = rss_kib();
    let (peak, stop) = rss_peak();
    let (status, reply) = upload_tar(&h, &s, "copy", &tar_file).await;
    let _ = stop.send(());
    let peak = peak.await.unwrap();
    assert_eq!((status, &reply["code"]), (200, &json!(0)), "{reply}");
    assert_eq!(reply["data"]["directory"], true);
    assert!(
        peak.saturating_sub(before) < 48 * 1024,
        "the host's memory grew by {} KiB unpacking a 100 MB tree",
        peak - before
    );
    let back = run(
        &h,
        backend,
        &s,
        "cd copy && sha256sum sub/deep/big.bin | cut -d' ' -f1 && readlink out && readlink sub/link \
         && cat 'odd name $(x) \u{e9}' && cat \"sub/$(printf 'new\\nline')\" && test -d empty && echo ok",
    )
    .await;
    assert_eq!(back, format!("{big_sha}\n/etc\n../odd\nxyok\n"));

    // Hostile archives: a name with `..`, an absolute name, a hard link to a file outside,
    // and a link out followed by an entry through it. Each is refused (4000) and nothing
    // lands outside the directory.
    let hostile = [
        archive(&[raw_entry("../escaped", b'0', "", b"x")]),
        archive(&[raw_entry("/tmp/absolute", b'0', "", b"x")]),
        archive(&[raw_entry("hard", b'1', "/etc/passwd", b"")]),
        archive(&[
            raw_entry("way", b'2', "/tmp", b""),
            raw_entry("way/planted", b'0', "", b"owned"),
        ]),
    ];
    for (i, bytes) in hostile.iter().enumerate() {
        let file = dir.path().join(format!("hostile-{i}.tar"));
        std::fs::write(&file, bytes).unwrap();
        let (status, reply) = upload_tar(&h, &s, "landing", &file).await;
        assert_eq!(
            (status, &reply["code"]),
            (400, &json!(4000)),
            "archive {i}: {reply}"
        );
    }
    let outside = run(
        &h,
        backend,
        &s,
        "ls /tmp/planted /tmp/absolute escaped 2>&1 | wc -l; ls landing | tr '\\n' ' '",
    )
    .await;
    assert!(outside.starts_with("3\n"), "{outside}");
    assert!(!outside.contains("hard"), "{outside}");

    // Another tenant: 4007 for the directory, both ways.
    let bob_file = dir.path().join("bob.tar");
    let (status, _) = download(&h, BOB, &s, "tree", &bob_file).await;
    assert_eq!(status, 404);
    let refused: Value = serde_json::from_slice(&std::fs::read(&bob_file).unwrap()).unwrap();
    assert_eq!(refused["code"], 4007, "{refused}");
    remove_backend_containers(backend);
}

/// Reads newline-delimited JSON off a streamed response until `want` lines have come.
async fn lines(response: &mut reqwest::Response, pending: &mut Vec<u8>, want: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < want {
        while let Some(at) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
        if out.len() >= want {
            break;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(20), response.chunk())
            .await
            .expect("a change within 20 s")
            .unwrap()
            .expect("the watch still open");
        pending.extend_from_slice(&chunk);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_list_and_a_recursive_watch_answer_as_the_sandboxs_user() {
    if !docker_ready() {
        return;
    }
    let backend = "dirs-watch";
    remove_backend_containers(backend);
    let h = host(backend).await;
    let s = new_session(&h, backend, json!({"user": "sandbox"})).await;
    run(
        &h,
        backend,
        &s,
        "mkdir -p w/a && printf 12345 > w/five && ln -s five w/alias",
    )
    .await;

    let info = get(
        &h,
        ALICE,
        &format!("/v1/sessions/{s}/files/info?path=w/five"),
    )
    .await;
    assert_eq!(info["code"], 0, "{info}");
    assert_eq!(
        (
            &info["data"]["kind"],
            &info["data"]["size"],
            &info["data"]["uid"]
        ),
        (&json!("file"), &json!(5), &json!(1000))
    );
    let listing = get(&h, ALICE, &format!("/v1/sessions/{s}/files/list?path=w")).await;
    assert_eq!(listing["code"], 0, "{listing}");
    let entries: Vec<(String, String)> = listing["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("a".into(), "directory".into()),
            ("alias".into(), "symlink".into()),
            ("five".into(), "file".into())
        ]
    );
    // As the sandbox's user: the agent's descriptors are not its to list (4030); a missing
    // path is 4000.
    let denied = get(
        &h,
        ALICE,
        &format!("/v1/sessions/{s}/files/list?path=/proc/1/fd"),
    )
    .await;
    assert_eq!(denied["code"], 4030, "{denied}");
    let missing = get(
        &h,
        ALICE,
        &format!("/v1/sessions/{s}/files/info?path=nowhere"),
    )
    .await;
    assert_eq!(missing["code"], 4000, "{missing}");
    let empty = get(&h, ALICE, &format!("/v1/sessions/{s}/files/info?path=")).await;
    assert_eq!(empty["code"], 4000, "{empty}");

    // A recursive watch: the response starts once it is up; a file made, written and
    // removed in a subdirectory comes as three lines.
    let mut watch = reqwest::Client::new()
        .get(format!(
            "{}/v1/sessions/{s}/files/watch?path=w&recursive=true&timeout_seconds=60",
            h.url
        ))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    run(&h, backend, &s, "printf hi > w/a/new && rm w/a/new").await;
    let mut pending = Vec::new();
    let seen = lines(&mut watch, &mut pending, 3).await;
    let events: Vec<(String, String)> = seen
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().into(),
                e["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("create".into(), "a/new".into()),
            ("modify".into(), "a/new".into()),
            ("delete".into(), "a/new".into()),
        ]
    );
    // A directory made under the watch is followed.
    run(
        &h,
        backend,
        &s,
        "mkdir w/b && sleep 0.2 && printf x > w/b/inner",
    )
    .await;
    let seen = lines(&mut watch, &mut pending, 3).await;
    let paths: Vec<&str> = seen.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["b", "b/inner", "b/inner"], "{seen:?}");
    drop(watch);

    // Another tenant: 4007 on every route; bad numbers are refused.
    for path in [
        format!("/v1/sessions/{s}/files/info?path=w"),
        format!("/v1/sessions/{s}/files/list?path=w"),
        format!("/v1/sessions/{s}/files/watch?path=w"),
    ] {
        let refused = get(&h, BOB, &path).await;
        assert_eq!(refused["code"], 4007, "{path}: {refused}");
    }
    for bad in [
        "timeout_seconds=0",
        "timeout_seconds=3601",
        "timeout_seconds=-1",
    ] {
        let refused = get(
            &h,
            ALICE,
            &format!("/v1/sessions/{s}/files/watch?path=w&{bad}"),
        )
        .await;
        assert!(
            refused["code"] == 4000 || refused["code"] == 4002,
            "{bad}: {refused}"
        );
    }
    remove_backend_containers(backend);
}
