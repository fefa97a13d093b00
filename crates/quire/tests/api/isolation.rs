//! Parsing in child processes: a document over the memory budget fails with a clear reason,
//! while the server and the documents beside it carry on.

use std::process::Stdio;

use quire_core::Permission;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::helpers::{TestServer, body};

#[tokio::test]
async fn documents_over_the_memory_budget_fail_while_the_one_beside_them_is_ready() {
    let server = TestServer::start_with(|c| c.parsing.memory_limit_mb = 16).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Heavy").await;
    let text = |bytes: usize| -> Vec<u8> {
        let line = b"The pump impeller turns and the seal holds the pressure.\n";
        line.iter().copied().cycle().take(bytes).collect()
    };
    // 40 MB cannot even be read within 16 MiB: the worker answers that it ran out of memory.
    let big = server
        .upload_ok(&key, &source, "big.txt", &text(40_000_000))
        .await;
    // 12 MB can be read, but not copied while parsing: the worker aborts on the allocation.
    let medium = server
        .upload_ok(&key, &source, "medium.txt", &text(12_000_000))
        .await;
    let good = server
        .upload_ok(
            &key,
            &source,
            "good.md",
            b"# Valve\n\nClose the gate valve slowly.",
        )
        .await;

    for id in [&big, &medium] {
        let failed = server.wait_for_status(&key, &source, id, "failed").await;
        assert_eq!(
            failed["error"], "processing this file needed more than the 16 MiB memory limit",
            "{failed}"
        );
    }
    server.wait_for_status(&key, &source, &good, "ready").await;
    let found = body(server.search(&key, json!({"query": "gate valve"})).await).await;
    assert_eq!(
        found["results"][0]["document"]["name"], "good.md",
        "{found}"
    );
    let sources = server.get(&key, "/api/v1/sources").await;
    assert_eq!(sources.status(), StatusCode::OK, "the server still answers");
}

#[tokio::test]
async fn parsing_can_stay_in_the_server_process() {
    let server = TestServer::start_with(|c| c.parsing.isolate = false).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Plain").await;
    let id = server
        .upload_ok(&key, &source, "note.txt", b"Grease the bearings monthly.")
        .await;
    let ready = server.wait_for_status(&key, &source, &id, "ready").await;
    assert_eq!(ready["chunkCount"], 1);
}

/// The worker reads hostile files, so it must not see the server's secrets: it starts with an
/// empty environment. A stand-in worker writes down what it was given.
#[tokio::test]
async fn the_parse_worker_gets_none_of_the_servers_environment() {
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("environment.txt");
    let worker = bin.path().join("worker.sh");
    std::fs::write(
        &worker,
        format!("#!/bin/sh\n/usr/bin/env > '{}'\nexit 3\n", seen.display()),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&worker).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&worker, permissions).unwrap();
    let server = TestServer::start_with(|c| c.parsing.worker_program = Some(worker.clone())).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Plain").await;
    let id = server
        .upload_ok(&key, &source, "note.txt", b"Grease the bearings monthly.")
        .await;
    server.wait_for_status(&key, &source, &id, "failed").await;
    let environment = std::fs::read_to_string(&seen).unwrap();
    // The test process has HOME, PATH, CARGO_* and more; the worker must have none of them.
    let names: Vec<&str> = environment
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .filter(|name| !["PWD", "SHLVL", "_"].contains(name))
        .collect();
    assert!(names.is_empty(), "the worker saw {names:?}");
}

#[tokio::test]
async fn the_parse_worker_is_hidden_and_speaks_only_json_on_stdout() {
    let quire = env!("CARGO_BIN_EXE_quire");
    let help = Command::new(quire).arg("--help").output().await.unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("parse-worker"));

    let run = |stdin: Vec<u8>| async move {
        let mut child = Command::new(quire)
            .arg("parse-worker")
            .env("RUST_LOG", "trace")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(&stdin).await.unwrap();
        drop(input);
        child.wait_with_output().await.unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("note.md");
    std::fs::write(&path, "# Pump\n\nPrime it first.").unwrap();
    let request = json!({
        "job": {
            "path": path,
            "name": "note.md",
            "content_type": "",
            "chunking": {"target_tokens": 256, "overlap_tokens": 32},
            "limits": {
                "max_pages": 10,
                "max_unpacked_bytes": 1_000_000,
                "max_archive_entries": 10,
                "max_attachment_depth": 1
            },
            "output": {"max_text_bytes": 1_000_000, "max_chunks": 100}
        },
        "budgets": {"memory_bytes": 64 * 1024 * 1024, "cpu_seconds": 10}
    });
    let output = run(serde_json::to_vec(&request).unwrap()).await;
    assert!(output.status.success());
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        answer,
        json!({"processed": {
            "chunks": [{"ordinal": 0, "page": 1, "section": "Pump", "content": "Prime it first."}],
            "page_count": 1
        }})
    );

    let output = run(b"not json".to_vec()).await;
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("could not read the request"), "{stderr}");
}
