//! Semantic search through the real API: hybrid by default when a model is configured,
//! keyword only (and saying so) without one, vectors removed with their documents, the same
//! results after a restart, and existing documents embedded when a model arrives or changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestServer, body, fake_embeddings, source_id};

/// The all-MiniLM-L6-v2 directory: `QUIRE_TEST_MODEL_DIR`, else the cache that
/// `scripts/fetch-model` fills (scripts/test runs it first).
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("QUIRE_TEST_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME is set");
            Path::new(&home).join(".cache/quire-models/all-MiniLM-L6-v2")
        });
    assert!(
        dir.join("model.safetensors").is_file(),
        "no model in {}: run scripts/fetch-model (scripts/test does) or set QUIRE_TEST_MODEL_DIR",
        dir.display()
    );
    dir
}

/// A second name for the model (the files linked, not copied): a "different" model to the
/// service, since the directory's name is part of the model id.
pub(crate) fn renamed_model(parent: &Path) -> PathBuf {
    let dir = parent.join("minilm-renamed");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(model_dir()).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

/// The version endpoint as an admin key sees it (with the semantic search details).
async fn health(server: &TestServer) -> Value {
    let admin = server.key(Permission::Admin).await;
    body(server.get(&admin, "/api/health/version").await).await
}

/// Waits until the background re-embedding has given `chunks` chunks their vectors.
async fn wait_for_embedded(server: &TestServer, chunks: u64) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let h = health(server).await;
        let semantic = &h["semanticSearch"];
        if semantic["embeddedChunks"] == chunks && semantic["reembedding"] == false {
            return h;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reached {chunks} embedded chunks: {h}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Documents that share no words with the queries below, only meaning.
const PETS: &str = "# Pets\n\nThe feline dozed on the rug beside the fireplace all afternoon.";
const FINANCE: &str = "# Finance\n\nQuarterly revenue grew by twelve percent over the prior year.";
const WEATHER: &str = "# Weather\n\nHeavy rainfall and strong winds are expected along the coast.";

async fn upload_three(server: &TestServer, key: &str, source: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for (name, text) in [
        ("pets.md", PETS),
        ("finance.md", FINANCE),
        ("weather.md", WEATHER),
    ] {
        let id = server.upload_ok(key, source, name, text.as_bytes()).await;
        server.wait_for_status(key, source, &id, "ready").await;
        ids.push(id);
    }
    ids
}

async fn top_names(server: &TestServer, key: &str, query: Value) -> Vec<String> {
    let response = server.search(key, query).await;
    assert_eq!(response.status(), StatusCode::OK);
    body(response).await["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn without_a_model_search_is_keyword_only_and_health_says_so() {
    let server = TestServer::start().await;
    let h = health(&server).await;
    assert_eq!(h["semanticSearch"]["enabled"], false, "{h}");
    assert!(
        h["semanticSearch"]["reason"]
            .as_str()
            .unwrap()
            .contains("no embedding model is configured"),
        "{h}"
    );
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    assert_eq!(
        top_names(&server, &key, json!({"query": "revenue"})).await,
        ["finance.md"]
    );
    // Meaning alone finds nothing without a model.
    assert!(
        top_names(&server, &key, json!({"query": "a cat sleeping"}))
            .await
            .is_empty()
    );
    assert!(!server.data_dir.path().join("index/vectors").exists());
}

#[tokio::test]
async fn a_model_that_cannot_be_loaded_leaves_the_service_up_and_keyword_only() {
    let missing = tempfile::tempdir().unwrap();
    let dir = missing.path().join("no-such-model");
    let server = TestServer::start_with(|c| c.embedding.model_dir = Some(dir.clone())).await;
    let h = health(&server).await;
    assert_eq!(h["semanticSearch"]["enabled"], false, "{h}");
    let reason = h["semanticSearch"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no-such-model") && reason.contains("keyword only"),
        "{reason}"
    );
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    assert_eq!(
        top_names(&server, &key, json!({"query": "rainfall"})).await,
        ["weather.md"]
    );
}

#[tokio::test]
async fn the_candle_engine_finds_the_same_by_meaning() {
    let server = TestServer::start_with(|c| {
        c.embedding.model_dir = Some(model_dir());
        c.embedding.engine = "candle".into();
    })
    .await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    let h = health(&server).await;
    assert_eq!(h["semanticSearch"]["engine"], "candle", "{h}");
    let names = top_names(&server, &key, json!({"query": "a cat sleeping"})).await;
    assert_eq!(names[0], "pets.md", "{names:?}");
    let names = top_names(&server, &key, json!({"query": "storm forecast"})).await;
    assert_eq!(names[0], "weather.md", "{names:?}");
}

#[tokio::test]
async fn with_a_model_search_is_hybrid_and_finds_by_meaning() {
    let server = TestServer::start_with(|c| c.embedding.model_dir = Some(model_dir())).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    let h = health(&server).await;
    assert_eq!(h["semanticSearch"]["enabled"], true, "{h}");
    assert_eq!(h["semanticSearch"]["dimensions"], 384, "{h}");
    assert_eq!(h["semanticSearch"]["embeddedChunks"], 3, "{h}");
    assert!(
        h["semanticSearch"]["engine"]
            .as_str()
            .unwrap()
            .starts_with("onnxruntime"),
        "with its library in the model cache (scripts/fetch-onnxruntime) the default engine is \
         ONNX Runtime: {h}"
    );

    let names = top_names(&server, &key, json!({"query": "a cat sleeping"})).await;
    assert_eq!(names[0], "pets.md", "{names:?}");
    let names = top_names(&server, &key, json!({"query": "storm forecast"})).await;
    assert_eq!(names[0], "weather.md", "{names:?}");

    // A keyword match and a meaning match agree: first in both rankings scores 1.
    let response = server
        .search(
            &key,
            json!({"query": "quarterly revenue growth", "limit": 3}),
        )
        .await;
    let results = body(response).await["results"].clone();
    assert_eq!(results[0]["document"]["name"], "finance.md");
    assert!((results[0]["score"].as_f64().unwrap() - 1.0).abs() < 1e-6);
    for r in results.as_array().unwrap() {
        let score = r["score"].as_f64().unwrap();
        assert!((0.0..=1.0 + 1e-6).contains(&score), "{r}");
        assert!(!r["content"].as_str().unwrap().is_empty(), "{r}");
        assert_eq!(r["metadata"]["page"], 1);
    }
}

#[tokio::test]
async fn semantic_hits_respect_the_key_scope_and_source_ids() {
    let server = TestServer::start_with(|c| c.embedding.model_dir = Some(model_dir())).await;
    let admin = server.key(Permission::Admin).await;
    let a = server.create_source(&admin, "A").await;
    let b = server.create_source(&admin, "B").await;
    let pets = server
        .upload_ok(&admin, &b, "pets.md", PETS.as_bytes())
        .await;
    server.wait_for_status(&admin, &b, &pets, "ready").await;
    let finance = server
        .upload_ok(&admin, &a, "finance.md", FINANCE.as_bytes())
        .await;
    server.wait_for_status(&admin, &a, &finance, "ready").await;

    let scoped = server
        .key_with(Permission::Read, SourceScope::only([source_id(&a)]), None)
        .await;
    // The closest chunk by meaning lives in B, which this key cannot see.
    let names = top_names(&server, &scoped, json!({"query": "a cat sleeping"})).await;
    assert!(names.iter().all(|n| n == "finance.md"), "{names:?}");
    let names = top_names(
        &server,
        &admin,
        json!({"query": "a cat sleeping", "sourceIds": [a]}),
    )
    .await;
    assert!(names.iter().all(|n| n == "finance.md"), "{names:?}");
    let names = top_names(&server, &admin, json!({"query": "a cat sleeping"})).await;
    assert_eq!(names[0], "pets.md");
}

#[tokio::test]
async fn deleting_a_document_removes_its_vectors() {
    let server = TestServer::start_with(|c| c.embedding.model_dir = Some(model_dir())).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let ids = upload_three(&server, &key, &source).await;
    let response = server
        .delete(
            &key,
            &format!("/api/v1/sources/{source}/documents/{}", ids[0]),
        )
        .await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(health(&server).await["semanticSearch"]["embeddedChunks"], 2);
    let names = top_names(&server, &key, json!({"query": "a cat sleeping"})).await;
    assert!(!names.contains(&"pets.md".to_owned()), "{names:?}");

    // Still gone after a restart: the deletion is in the vector log.
    let (dir, clock) = server.stop().await;
    let server =
        TestServer::start_in(dir, clock, |c| c.embedding.model_dir = Some(model_dir())).await;
    assert_eq!(health(&server).await["semanticSearch"]["embeddedChunks"], 2);
}

#[tokio::test]
async fn results_are_the_same_after_a_restart() {
    let server = TestServer::start_with(|c| c.embedding.model_dir = Some(model_dir())).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    let queries = [
        "a cat sleeping",
        "quarterly revenue",
        "storm on the coast",
        "percent",
    ];
    let mut before = Vec::new();
    for q in queries {
        before.push(body(server.search(&key, json!({"query": q})).await).await);
    }
    let (dir, clock) = server.stop().await;
    let server =
        TestServer::start_in(dir, clock, |c| c.embedding.model_dir = Some(model_dir())).await;
    for (q, expected) in queries.iter().zip(&before) {
        let after = body(server.search(&key, json!({"query": q})).await).await;
        assert_eq!(&after, expected, "query {q:?}");
    }
}

#[tokio::test]
async fn a_model_added_later_embeds_existing_documents() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    let (dir, clock) = server.stop().await;

    let server =
        TestServer::start_in(dir, clock, |c| c.embedding.model_dir = Some(model_dir())).await;
    wait_for_embedded(&server, 3).await;
    let names = top_names(&server, &key, json!({"query": "a cat sleeping"})).await;
    assert_eq!(names[0], "pets.md", "{names:?}");
}

#[tokio::test]
async fn a_new_model_replaces_the_old_vectors_instead_of_mixing_with_them() {
    let models = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(|c| c.embedding.model_dir = Some(model_dir())).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    let first_model = health(&server).await["semanticSearch"]["model"].clone();
    let (dir, clock) = server.stop().await;

    let renamed = renamed_model(models.path());
    let server = TestServer::start_in(dir, clock, |c| c.embedding.model_dir = Some(renamed)).await;
    let h = wait_for_embedded(&server, 3).await;
    assert_ne!(h["semanticSearch"]["model"], first_model, "{h}");
    assert!(
        h["semanticSearch"]["model"]
            .as_str()
            .unwrap()
            .starts_with("local:minilm-renamed@"),
        "{h}"
    );
    assert!(
        server
            .data_dir
            .path()
            .join("index/vectors.previous")
            .is_dir()
    );
    let names = top_names(&server, &key, json!({"query": "a cat sleeping"})).await;
    assert_eq!(names[0], "pets.md", "{names:?}");
}

#[tokio::test]
async fn an_openai_compatible_server_embeds_and_search_survives_its_failures() {
    use std::sync::atomic::Ordering;

    let fake = fake_embeddings::start().await;
    let base_url = fake.base_url.clone();
    let server = TestServer::start_with(|c| {
        c.embedding.base_url = Some(base_url);
        c.embedding.model = Some("bag-of-words".into());
    })
    .await;
    let h = health(&server).await;
    assert_eq!(h["semanticSearch"]["enabled"], true, "{h}");
    assert_eq!(
        h["semanticSearch"]["dimensions"],
        fake_embeddings::DIMS,
        "{h}"
    );
    assert!(
        h["semanticSearch"]["model"]
            .as_str()
            .unwrap()
            .starts_with("openai:bag-of-words@"),
        "{h}"
    );
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    upload_three(&server, &key, &source).await;
    assert_eq!(health(&server).await["semanticSearch"]["embeddedChunks"], 3);

    // The embedding server fails: search still answers, from the keyword index.
    fake.failing.store(true, Ordering::Relaxed);
    assert_eq!(
        top_names(&server, &key, json!({"query": "rainfall"})).await,
        ["weather.md"]
    );
    // A document cannot be embedded: it fails with the reason instead of being half indexed.
    let id = server
        .upload_ok(
            &key,
            &source,
            "late.md",
            b"# Late\n\nArrived while the model was down.",
        )
        .await;
    let doc = server.wait_for_status(&key, &source, &id, "failed").await;
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.contains("could not embed") && error.contains("HTTP 500"),
        "{error}"
    );
    // Neither the embedding server's address nor its own words reach the client.
    assert!(
        !error.contains("model crashed") && !error.contains("127.0.0.1"),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_embedding_server_leaves_the_service_keyword_only() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let server = TestServer::start_with(|c| {
        c.embedding.base_url = Some(format!("http://{addr}/v1"));
        c.embedding.model = Some("m".into());
        c.embedding.timeout_seconds = 2;
    })
    .await;
    let h = health(&server).await;
    assert_eq!(h["semanticSearch"]["enabled"], false, "{h}");
    let reason = h["semanticSearch"]["reason"].as_str().unwrap();
    assert!(reason.contains(&addr.to_string()), "{reason}");
}
