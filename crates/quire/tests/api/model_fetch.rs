//! `quire model fetch` as a process: it fills a model directory from a hub on loopback, and
//! when the hub cannot be reached it says so and names the offline route.

use std::path::Path;

use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use tokio::process::Command;

/// Runs `quire model fetch ARGS` in `cwd` with `hub_url` in `QUIRE_MODEL_HUB_URL`.
async fn fetch(cwd: &Path, hub_url: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["model", "fetch"])
        .args(args)
        .current_dir(cwd)
        .env("QUIRE_MODEL_HUB_URL", hub_url)
        .env_remove("QUIRE_CONFIG")
        .env_remove("QUIRE_MODEL_CACHE")
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test]
async fn fetch_fills_the_directory_from_a_mirror_and_prints_it() {
    let app = axum::Router::new().route(
        "/{*path}",
        axum::routing::get(|UrlPath(path): UrlPath<String>| async move {
            match path.strip_prefix("acme/tiny/resolve/main/") {
                Some(file) => format!("content of {file}").into_response(),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hub = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("models/tiny");

    let (ok, out, err) = fetch(
        scratch.path(),
        &hub,
        &["--model", "acme/tiny", "--dir", dir.to_str().unwrap()],
    )
    .await;

    assert!(ok, "{err}");
    assert_eq!(out, format!("{}\n", dir.display()));
    for file in ["config.json", "vocab.txt", "model.safetensors"] {
        assert_eq!(
            std::fs::read_to_string(dir.join(file)).unwrap(),
            format!("content of {file}")
        );
        assert!(err.contains(file), "{err}");
    }
}

#[tokio::test]
async fn an_unreachable_hub_names_the_offline_route() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hub = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("all-MiniLM-L6-v2");

    let (ok, out, err) = fetch(scratch.path(), &hub, &["--dir", dir.to_str().unwrap()]).await;

    assert!(!ok);
    assert_eq!(out, "");
    for needle in [
        "error: could not fetch sentence-transformers/all-MiniLM-L6-v2",
        &format!("could not reach {hub}/"),
        "QUIRE_MODEL_HUB_URL",
        &format!("scripts/fetch-model {}", dir.display()),
        "DEVELOPERS.md",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err}");
    }
    assert!(!dir.exists(), "no empty model directory is left");
}
