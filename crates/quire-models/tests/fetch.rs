//! The model download against a fake hub on loopback (the base-URL override): files land
//! whole under their final names or not at all, pinned hashes are enforced, complete files are
//! not fetched again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quire_models::ModelError;
use quire_models::fetch::{
    DEFAULT_MODEL, DEFAULT_MODEL_WEIGHTS_SHA256, FetchOutcome, HubFile, ModelFetch, model_files,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REPO: &str = "acme/tiny-model";

#[derive(Clone, Default)]
struct Hub {
    files: Arc<HashMap<String, Vec<u8>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn serve_file(State(hub): State<Hub>, UrlPath(path): UrlPath<String>) -> Response {
    hub.requests.lock().unwrap().push(path.clone());
    match hub.files.get(&path) {
        Some(bytes) => bytes.clone().into_response(),
        None => (StatusCode::NOT_FOUND, "Entry not found").into_response(),
    }
}

/// A hub serving `files` (name → content) of [`REPO`] at `main`; returns its URL and its log.
async fn start_hub(files: &[(&str, &[u8])]) -> (String, Arc<Mutex<Vec<String>>>) {
    let hub = Hub {
        files: Arc::new(
            files
                .iter()
                .map(|(name, bytes)| (format!("{REPO}/resolve/main/{name}"), bytes.to_vec()))
                .collect(),
        ),
        requests: Arc::default(),
    };
    let requests = hub.requests.clone();
    let app = axum::Router::new()
        .route("/{*path}", axum::routing::get(serve_file))
        .with_state(hub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, requests)
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

const WEIGHTS: &[u8] = b"not really safetensors, but 43 bytes of it.";

fn hub_files() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("config.json", br#"{"hidden_size": 4}"#),
        ("vocab.txt", b"[PAD]\n[UNK]\n"),
        ("tokenizer.json", b"{}"),
        ("sentence_bert_config.json", br#"{"max_seq_length": 16}"#),
        ("modules.json", b"[]"),
        // A file in a folder of its own: the folder is made in the cache.
        (
            "1_Pooling/config.json",
            br#"{"pooling_mode_cls_token": true}"#,
        ),
        ("config_sentence_transformers.json", br#"{"prompts": {}}"#),
        ("model.safetensors", WEIGHTS),
    ]
}

fn fetch(hub_url: &str, dir: &Path, weights_sha256: &str) -> ModelFetch {
    let mut fetch = ModelFetch::new(REPO, dir);
    fetch.hub_url = hub_url.to_owned();
    for file in &mut fetch.files {
        if file.name == "model.safetensors" {
            file.sha256 = Some(weights_sha256.to_owned());
        }
    }
    fetch
}

/// Every entry of `dir`, sorted: shows leftovers such as partial downloads.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn every_file_lands_whole_and_a_second_run_downloads_nothing() {
    let (url, requests) = start_hub(&hub_files()).await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("cache/tiny-model");

    let report = fetch(&url, &dir, &sha256(WEIGHTS)).run().await.unwrap();

    assert!(
        report.iter().all(|f| f.outcome == FetchOutcome::Downloaded),
        "{report:?}"
    );
    for (name, content) in hub_files() {
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), content, "{name}");
    }
    let weights = report
        .iter()
        .find(|f| f.name == "model.safetensors")
        .unwrap();
    assert_eq!(
        (weights.bytes, weights.sha256.as_str()),
        (43, sha256(WEIGHTS).as_str())
    );
    assert_eq!(
        entries(&dir),
        [
            "1_Pooling",
            "config.json",
            "config_sentence_transformers.json",
            "model.safetensors",
            "modules.json",
            "sentence_bert_config.json",
            "tokenizer.json",
            "vocab.txt"
        ],
        "no partial file is left behind"
    );
    assert_eq!(entries(&dir.join("1_Pooling")), ["config.json"]);
    assert_eq!(
        *requests.lock().unwrap(),
        hub_files()
            .iter()
            .map(|(name, _)| format!("{REPO}/resolve/main/{name}"))
            .collect::<Vec<_>>()
    );

    let again = fetch(&url, &dir, &sha256(WEIGHTS)).run().await.unwrap();
    assert!(
        again
            .iter()
            .all(|f| f.outcome == FetchOutcome::AlreadyPresent),
        "{again:?}"
    );
    assert_eq!(
        requests.lock().unwrap().len(),
        hub_files().len(),
        "nothing fetched twice"
    );
}

#[tokio::test]
async fn weights_with_the_wrong_hash_are_refused_and_not_kept() {
    let (url, _) = start_hub(&hub_files()).await;
    let scratch = tempfile::tempdir().unwrap();
    let pinned = sha256(b"the weights we expected");

    let error = fetch(&url, scratch.path(), &pinned)
        .run()
        .await
        .unwrap_err();

    match &error {
        ModelError::Checksum {
            file,
            expected,
            actual,
            ..
        } => {
            assert_eq!(file, "model.safetensors");
            assert_eq!(*expected, pinned);
            assert_eq!(*actual, sha256(WEIGHTS));
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert!(error.to_string().contains("not kept"), "{error}");
    assert!(
        !entries(scratch.path())
            .iter()
            .any(|n| n.contains("safetensors")),
        "neither the weights nor a partial file remain: {:?}",
        entries(scratch.path())
    );
}

#[tokio::test]
async fn wrong_weights_already_on_disk_are_replaced() {
    let (url, requests) = start_hub(&hub_files()).await;
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("model.safetensors"), b"stale").unwrap();
    std::fs::write(scratch.path().join("config.json"), b"{\"kept\": true}").unwrap();

    let report = fetch(&url, scratch.path(), &sha256(WEIGHTS))
        .run()
        .await
        .unwrap();

    assert_eq!(
        std::fs::read(scratch.path().join("model.safetensors")).unwrap(),
        WEIGHTS
    );
    // Without a pinned hash a present file counts as complete: downloads only ever appear
    // under the final name once whole.
    assert_eq!(report[0].outcome, FetchOutcome::AlreadyPresent);
    assert_eq!(
        std::fs::read(scratch.path().join("config.json")).unwrap(),
        b"{\"kept\": true}"
    );
    // Every file but the configuration already there.
    assert_eq!(requests.lock().unwrap().len(), hub_files().len() - 1);
}

#[tokio::test]
async fn a_file_in_flight_never_has_its_final_name() {
    // A server that sends half the weights, then waits for the test before sending the rest.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await.unwrap();
        let (first, rest) = WEIGHTS.split_at(20);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
            WEIGHTS.len()
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(first).await.unwrap();
        released.await.unwrap();
        socket.write_all(rest).await.unwrap();
    });
    let scratch = tempfile::tempdir().unwrap();
    let mut plan = fetch(&url, scratch.path(), &sha256(WEIGHTS));
    plan.files.retain(|f| f.name == "model.safetensors");
    let download = tokio::spawn(async move { plan.run().await });

    // The client creates its file at a moment only it knows: watch for the first entry.
    let mut seen = entries(scratch.path());
    for _ in 0..500 {
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        seen = entries(scratch.path());
    }
    assert_eq!(seen.len(), 1, "the download never started: {seen:?}");
    assert!(
        seen[0].starts_with(".model.safetensors.") && seen[0].ends_with(".partial"),
        "half a file is visible as {seen:?}"
    );

    release.send(()).unwrap();
    let report = download.await.unwrap().unwrap();
    assert_eq!(report[0].outcome, FetchOutcome::Downloaded);
    assert_eq!(entries(scratch.path()), ["model.safetensors"]);
    assert_eq!(
        std::fs::read(scratch.path().join("model.safetensors")).unwrap(),
        WEIGHTS
    );
}

#[tokio::test]
async fn a_download_that_breaks_off_leaves_no_file() {
    // A server that announces 1,000 bytes, sends 10 and hangs up.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n0123456789")
                .await;
            drop(socket);
        }
    });
    let scratch = tempfile::tempdir().unwrap();
    let mut plan = fetch(&url, scratch.path(), &sha256(WEIGHTS));
    plan.files.retain(|f| f.name == "model.safetensors");

    let error = plan.run().await.unwrap_err();

    assert!(matches!(error, ModelError::Protocol { .. }), "{error:?}");
    assert!(error.to_string().contains("broke off"), "{error}");
    assert!(
        entries(scratch.path()).is_empty(),
        "{:?}",
        entries(scratch.path())
    );
}

#[tokio::test]
async fn a_missing_optional_file_is_skipped_and_a_missing_required_one_fails() {
    let files: Vec<_> = hub_files()
        .into_iter()
        .filter(|(name, _)| *name != "tokenizer.json")
        .collect();
    let (url, _) = start_hub(&files).await;
    let scratch = tempfile::tempdir().unwrap();
    let report = fetch(&url, scratch.path(), &sha256(WEIGHTS))
        .run()
        .await
        .unwrap();
    let tokenizer = report.iter().find(|f| f.name == "tokenizer.json").unwrap();
    assert_eq!(tokenizer.outcome, FetchOutcome::NotOnHub);
    assert!(!scratch.path().join("tokenizer.json").exists());

    let files: Vec<_> = hub_files()
        .into_iter()
        .filter(|(name, _)| *name != "vocab.txt")
        .collect();
    let (url, _) = start_hub(&files).await;
    let scratch = tempfile::tempdir().unwrap();
    let error = fetch(&url, scratch.path(), &sha256(WEIGHTS))
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(error, ModelError::Remote { status: 404, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("{url}/{REPO}/resolve/main/vocab.txt")),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_hub_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("tiny-model");
    let error = fetch(&url, &dir, &sha256(WEIGHTS)).run().await.unwrap_err();
    assert!(matches!(error, ModelError::Unreachable { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains(&format!("could not reach {url}/")),
        "{error}"
    );
    assert!(!dir.exists(), "the model directory it created is removed");
}

#[test]
fn the_default_models_weights_are_pinned_and_match_the_offline_route() {
    let pinned: Vec<HubFile> = model_files(DEFAULT_MODEL)
        .into_iter()
        .filter(|f| f.sha256.is_some())
        .collect();
    assert_eq!(pinned.len(), 1);
    assert_eq!(pinned[0].name, "model.safetensors");
    assert!(model_files("acme/other").iter().all(|f| f.sha256.is_none()));

    // scripts/fetch-model installs the same weights from a Python package and checks the
    // same hash: both routes must agree on it.
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-model"),
    )
    .unwrap();
    assert!(
        script.contains(&format!(
            "weights_sha256=\"{DEFAULT_MODEL_WEIGHTS_SHA256}\""
        )),
        "scripts/fetch-model pins other weights"
    );
}
