//! The CLI contract, run as a separate process against a running server's data directory.

use tokio::process::Command;

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{TestServer, assert_error, body};

/// Runs the binary without blocking the runtime the server under test runs on.
async fn quire(args: &[&str]) -> (bool, String, String) {
    let data_dir = args
        .iter()
        .position(|a| *a == "--data-dir")
        .map(|i| std::path::Path::new(args[i + 1]));
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(args)
        .env_remove("QUIRE_DATA_DIR")
        .envs(data_dir.map(crate::helpers::store_env).unwrap_or_default())
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
async fn keys_are_managed_while_the_server_runs() {
    let server = TestServer::start().await;
    let dir = server.data_dir.path().to_str().unwrap().to_owned();

    // Bootstrap: an admin key creates a source whose id scopes the next key.
    let (ok, out, err) = quire(&[
        "keys",
        "create",
        "--name",
        "ops",
        "--permission",
        "admin",
        "--data-dir",
        &dir,
        "--json",
    ])
    .await;
    assert!(ok, "{err}");
    let admin: Value = serde_json::from_str(&out).unwrap();
    let admin_key = admin["key"].as_str().unwrap().to_owned();
    assert_eq!(admin["permission"], "admin");
    assert_eq!(admin["sources"], Value::Null);
    assert_eq!(admin["rateLimit"], Value::Null);
    let source = server.create_source(&admin_key, "Docs").await;

    let (ok, out, err) = quire(&[
        "keys",
        "create",
        "--name",
        "agent",
        "--permission",
        "read",
        "--sources",
        &source,
        "--rate-limit",
        "5",
        "--json",
        "--data-dir",
        &dir,
    ])
    .await;
    assert!(ok, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    for field in ["id", "key", "name", "permission", "sources", "rateLimit"] {
        assert!(created.get(field).is_some(), "missing {field}: {created}");
    }
    assert_eq!(created["sources"], serde_json::json!([source]));
    assert_eq!(created["rateLimit"], 5);
    let key = created["key"].as_str().unwrap().to_owned();
    let id = created["id"].as_str().unwrap().to_owned();

    let response = server.get(&key, "/api/v1/sources").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers().get("x-ratelimit-limit").unwrap(), "5");
    assert_eq!(body(response).await.as_array().unwrap().len(), 1);

    let (ok, out, _) = quire(&["keys", "list", "--json", "--data-dir", &dir]).await;
    assert!(ok);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(!out.contains(&key), "secrets are never listed");
    assert!(
        listed[1]["lastUsedAt"].is_string(),
        "use is recorded: {listed}"
    );

    let (ok, out, err) = quire(&["keys", "revoke", &id, "--data-dir", &dir]).await;
    assert!(ok, "{err}");
    assert!(out.contains("Revoked"));
    assert_error(
        server.get(&key, "/api/v1/sources").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;

    let (ok, _, err) = quire(&[
        "keys",
        "revoke",
        &uuid::Uuid::new_v4().to_string(),
        "--data-dir",
        &dir,
    ])
    .await;
    assert!(!ok);
    assert!(err.contains("no API key"), "{err}");
    let (ok, _, err) = quire(&[
        "keys",
        "create",
        "--name",
        "x",
        "--permission",
        "write",
        "--data-dir",
        &dir,
    ])
    .await;
    assert!(!ok);
    assert!(err.contains("read-write"), "{err}");
    let unknown = uuid::Uuid::new_v4().to_string();
    let (ok, _, err) = quire(&[
        "keys",
        "create",
        "--name",
        "x",
        "--permission",
        "read",
        "--sources",
        &unknown,
        "--data-dir",
        &dir,
    ])
    .await;
    assert!(!ok);
    assert!(err.contains("does not exist"), "{err}");
}

#[tokio::test]
async fn config_print_default_is_valid_toml_with_the_documented_defaults() {
    let (ok, out, _) = quire(&["config", "print-default"]).await;
    assert!(ok);
    let parsed: toml::Table = toml::from_str(&out).unwrap();
    assert_eq!(parsed["data_dir"].as_str(), Some("./quire-data"));
    assert_eq!(parsed["bind"].as_str(), Some("127.0.0.1:8080"));
    assert_eq!(
        parsed["limits"]["max_upload_bytes"].as_integer(),
        Some(100 * 1024 * 1024)
    );
}

#[tokio::test]
async fn config_show_applies_environment_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["config", "show", "--data-dir", dir.path().to_str().unwrap()])
        .env("QUIRE_BIND", "127.0.0.1:9999")
        .env("QUIRE_LIMITS_SEARCH_PER_MINUTE", "42")
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let shown: toml::Table = toml::from_str(&String::from_utf8(output.stdout).unwrap()).unwrap();
    assert_eq!(shown["bind"].as_str(), Some("127.0.0.1:9999"));
    assert_eq!(shown["limits"]["search_per_minute"].as_integer(), Some(42));
    assert_eq!(shown["data_dir"].as_str(), dir.path().to_str());
}

#[tokio::test]
async fn config_show_never_prints_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["config", "show", "--data-dir", dir.path().to_str().unwrap()])
        .env(
            "QUIRE_STORE_URL",
            "postgres://quire:db-hunter2@db.internal/quire",
        )
        .env("QUIRE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
        .env("QUIRE_LLM_MODEL", "m")
        .env("QUIRE_LLM_API_KEY", "sk-llm-hunter2")
        .env("QUIRE_EMBEDDING_API_KEY", "sk-embed-hunter2")
        .env("QUIRE_FILES_ACCESS_KEY_ID", "AKIA")
        .env("QUIRE_FILES_SECRET_ACCESS_KEY", "s3-hunter2")
        .output()
        .await
        .unwrap();
    let shown = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{shown}");
    assert!(!shown.contains("hunter2"), "a secret was printed:\n{shown}");
    let shown: toml::Table = toml::from_str(&shown).unwrap();
    assert_eq!(
        shown["store"]["url"].as_str(),
        Some("postgres://quire:***@db.internal/quire")
    );
    assert_eq!(shown["llm"]["api_key"].as_str(), Some("***"));
}

/// `quire serve` as a real process: it serves, never logs API keys (even at debug level), and
/// SIGTERM stops it cleanly with exit code 0.
#[tokio::test]
async fn serve_stops_gracefully_on_sigterm() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .envs(crate::helpers::store_env(dir.path()))
        .env("RUST_LOG", "debug")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let address = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some((_, url)) = line.split_once("listening on ") {
                return url.trim().to_owned();
            }
        }
        panic!("server exited before listening");
    })
    .await
    .expect("server did not start");

    let rest_of_log = tokio::spawn(async move {
        let mut all = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            all.push_str(&line);
            all.push('\n');
        }
        all
    });

    let version = reqwest::get(format!("{address}/api/health/version"))
        .await
        .unwrap();
    assert_eq!(version.status(), StatusCode::OK);
    let secret = format!("qk_{}", "5ec7e7".repeat(8));
    let denied = reqwest::Client::new()
        .get(format!("{address}/api/v1/sources"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(15), child.wait())
        .await
        .expect("server did not stop after SIGTERM")
        .unwrap();
    assert!(status.success(), "exit status {status}");
    let log = rest_of_log.await.unwrap();
    assert!(
        log.contains("/api/v1/sources"),
        "requests are logged: {log}"
    );
    assert!(!log.contains(&secret[3..]), "an API key reached the log");
    if crate::helpers::store_url_for(dir.path()).is_none() {
        assert!(dir.path().join("quire.db").exists());
    }
}

/// What the binary writes is for its own user only: the data directory, the database (with
/// webhook secrets and key hashes) and the originals' directory, whatever the caller's umask.
#[tokio::test]
async fn the_data_directory_and_database_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;

    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["keys", "create", "--name", "ops", "--permission", "admin"])
        .arg("--data-dir")
        .arg(&dir)
        .env_remove("QUIRE_DATA_DIR")
        .env_remove("QUIRE_STORE_URL")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let expected = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), expected, "{}", path.display());
        checked += 1;
    }
    assert!(dir.join("quire.db").exists() && checked >= 1);
}
