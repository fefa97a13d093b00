//! The first start on a machine without a model: `quire serve` from an empty home directory
//! answers at once (keyword only, the version endpoint saying semantic search is being
//! prepared), fetches the default model from the hub (here a mirror on loopback that serves
//! the test model's files and holds the weights back until the test lets them go), and then
//! turns hybrid search on and embeds what was uploaded meanwhile. With fetching off, the log
//! names the command that brings the files.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Mutex, Notify};

use crate::crash::key_from_cli;

/// A hub mirror serving the test model's directory, which holds `model.safetensors` until
/// `release` is notified.
async fn mirror(model_dir: &Path, release: Arc<Notify>) -> String {
    #[derive(Clone)]
    struct Hub {
        dir: std::path::PathBuf,
        release: Arc<Notify>,
    }
    async fn file(
        State(hub): State<Hub>,
        UrlPath(path): UrlPath<String>,
    ) -> axum::response::Response {
        let Some(name) = path.strip_prefix("sentence-transformers/all-MiniLM-L6-v2/resolve/main/")
        else {
            return StatusCode::NOT_FOUND.into_response();
        };
        if name == "model.safetensors" {
            hub.release.notified().await;
        }
        match tokio::fs::read(hub.dir.join(name)).await {
            Ok(bytes) => bytes.into_response(),
            Err(_) => StatusCode::NOT_FOUND.into_response(),
        }
    }
    let app = axum::Router::new()
        .route("/{*path}", axum::routing::get(file))
        .with_state(Hub {
            dir: model_dir.to_owned(),
            release,
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// `quire serve` with `home` as its home directory and `env` added; its address and the log
/// lines seen so far.
async fn serve(
    data: &Path,
    home: &Path,
    env: &[(&str, String)],
) -> (Child, String, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .env("HOME", home)
        .env_remove("QUIRE_MODEL_CACHE")
        .env_remove("QUIRE_DATA_DIR")
        .env_remove("QUIRE_CONFIG")
        .env_remove("ORT_DYLIB_PATH")
        .env("RUST_LOG", "info")
        .envs(crate::helpers::store_env(data))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let address = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            log.lock().await.push(line.clone());
            if let Some((_, url)) = line.split_once("listening on ") {
                return url.trim().to_owned();
            }
        }
        panic!("the server exited before listening: {:?}", log.lock().await);
    })
    .await
    .expect("the server did not start");
    let kept = Arc::clone(&log);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            kept.lock().await.push(line);
        }
    });
    (child, address, log)
}

async fn get(client: &reqwest::Client, url: &str, key: &str) -> Value {
    client
        .get(url)
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `check` every 50 ms until it holds; fails after `limit`.
async fn until<F: std::future::Future<Output = bool>>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) {
    crate::helpers::poll(limit, what, || {
        let checked = check();
        async move { checked.await.then_some(()) }
    })
    .await
}

#[tokio::test]
async fn the_first_start_fetches_the_model_and_turns_hybrid_search_on() {
    let model_dir = crate::semantic::model_dir();
    let release = Arc::new(Notify::new());
    let hub = mirror(&model_dir, Arc::clone(&release)).await;
    let home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    // The fast engine's library is the test's own: its route (the package index) is not under
    // test here, and it is what a first start would fetch.
    let library = std::env::var("QUIRE_TEST_ONNXRUNTIME").expect(
        "QUIRE_TEST_ONNXRUNTIME must name the ONNX Runtime library (scripts/fetch-onnxruntime)",
    );
    let env = [
        ("QUIRE_MODEL_HUB_URL", hub),
        ("QUIRE_EMBEDDING_ONNXRUNTIME_LIBRARY", library),
    ];
    // The test polls searches until the model is there: far beyond the default rate limit.
    let key = key_from_cli(
        data.path(),
        crate::helpers::store_env(data.path()),
        &["--rate-limit", "1000000"],
    )
    .await;
    // A node of a shared store fetches before it serves (the nodes must agree on the model):
    // nothing to hold back there.
    let shared = crate::helpers::store_url_for(data.path()).is_some();
    if shared {
        release.notify_one();
    }
    let (mut child, address, log) = serve(data.path(), home.path(), &env).await;
    let client = reqwest::Client::new();
    let version = format!("{address}/api/health/version");
    if shared {
        let health = get(&client, &version, &key).await;
        assert_eq!(health["semanticSearch"]["enabled"], true, "{health}");
        let log = log.lock().await.join("\n");
        assert!(log.contains("fetched the embedding model from"), "{log}");
        child.kill().await.unwrap();
        return;
    }

    // The API answers while the weights are held back: keyword search, "preparing".
    let health = get(&client, &version, &key).await;
    assert_eq!(health["semanticSearch"]["enabled"], false, "{health}");
    assert_eq!(health["semanticSearch"]["preparing"], true, "{health}");
    assert!(
        health["semanticSearch"]["reason"]
            .as_str()
            .unwrap()
            .contains("being prepared"),
        "{health}"
    );
    let public = client
        .get(&version)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(public["semanticSearch"]["preparing"], true, "{public}");
    let source: Value = client
        .post(format!("{address}/api/v1/sources"))
        .bearer_auth(&key)
        .json(&json!({"name": "Pets"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let source = source["id"].as_str().unwrap().to_owned();
    let form = Form::new().part(
        "file",
        Part::bytes(b"# Pets\n\nThe cat sleeps on the warm windowsill all afternoon.\n".to_vec())
            .file_name("pets.md"),
    );
    let uploaded: Value = client
        .post(format!(
            "{address}/api/v1/sources/{source}/documents/upload"
        ))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let doc = uploaded["id"].as_str().unwrap().to_owned();
    let document = format!("{address}/api/v1/sources/{source}/documents/{doc}");
    until(
        Duration::from_secs(30),
        "the document being ready",
        || async { get(&client, &document, &key).await["status"] == "ready" },
    )
    .await;
    let search = |query: &'static str| {
        let (client, address, key) = (client.clone(), address.clone(), key.clone());
        async move {
            let found: Value = client
                .post(format!("{address}/api/v1/search"))
                .bearer_auth(&key)
                .json(&json!({"query": query}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            found["results"].as_array().unwrap().len()
        }
    };
    assert_eq!(
        search("windowsill").await,
        1,
        "keyword search works meanwhile"
    );
    assert_eq!(
        search("a feline napping").await,
        0,
        "no meaning without the model"
    );

    // The weights arrive: semantic search turns on, and the document uploaded meanwhile is
    // found by its meaning.
    release.notify_one();
    until(
        Duration::from_secs(60),
        "semantic search turning on",
        || async { get(&client, &version, &key).await["semanticSearch"]["enabled"] == true },
    )
    .await;
    let health = get(&client, &version, &key).await;
    assert!(
        health["semanticSearch"].get("preparing").is_none(),
        "{health}"
    );
    assert_eq!(
        health["semanticSearch"]["engine"]
            .as_str()
            .map(|e| e.starts_with("onnx")),
        Some(true),
        "{health}"
    );
    until(
        Duration::from_secs(60),
        "the document found by meaning",
        || async { search("a feline napping").await == 1 },
    )
    .await;
    let cache = home
        .path()
        .join(".cache/quire-models/all-MiniLM-L6-v2/model.safetensors");
    assert!(cache.is_file(), "the model is kept for the next start");
    let log = log.lock().await.join("\n");
    assert!(log.contains("fetched the embedding model from"), "{log}");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn with_fetching_off_the_log_names_the_command_that_brings_the_model() {
    let home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let env = [("QUIRE_EMBEDDING_FETCH_MODEL", "false".to_owned())];
    let (mut child, address, log) = serve(data.path(), home.path(), &env).await;
    let health: Value = reqwest::get(format!("{address}/api/health/version"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        health["semanticSearch"],
        json!({"enabled": false}),
        "{health}"
    );
    let log = log.lock().await.join("\n");
    assert!(log.contains("quire model fetch"), "{log}");
    assert!(!home.path().join(".cache/quire-models").exists());
    child.kill().await.unwrap();
}
