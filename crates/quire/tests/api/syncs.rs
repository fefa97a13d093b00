//! Sources that sync from a folder on the server: created by admin keys under the configured
//! roots only, filled by a first run at once, and kept in step by later runs (new files become
//! documents, changed ones new versions, deleted ones deletions, unchanged ones are not fetched
//! again); runs are listed with their counts; credentials of an S3 source are never shown.

use std::path::Path;
use std::time::Duration;

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestServer, assert_error, body};

async fn create(server: &TestServer, key: &str, request: Value) -> reqwest::Response {
    server.post_json(key, "/api/v1/sources", &request).await
}

/// Polls the source's runs until the newest has ended; returns it.
pub(crate) async fn finished_run(
    server: &TestServer,
    key: &str,
    source: &str,
    runs_before: usize,
) -> Value {
    crate::helpers::poll(Duration::from_secs(60), "the run's end", || async {
        let runs = body(
            server
                .get(key, &format!("/api/v1/sources/{source}/syncs"))
                .await,
        )
        .await;
        let runs = runs.as_array().unwrap().clone();
        (runs.len() > runs_before && runs[0]["status"] != "running").then(|| runs[0].clone())
    })
    .await
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn a_folder_source_fills_itself_and_follows_the_folders_changes() {
    let root = tempfile::tempdir().unwrap();
    let docs = root.path().join("docs");
    write(
        &docs,
        "pumps.md",
        "# Pumps\n\nPrime the pump before starting it.\n",
    );
    write(
        &docs,
        "valves/gate.md",
        "# Gate valves\n\nOpen gate valves fully.\n",
    );
    write(&docs, "old.md", "# Old\n\nThis note is obsolete.\n");
    write(&docs, "skip.tmp", "scratch");
    write(&docs, ".hidden.md", "# Hidden\n");
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| {
        c.connectors.folder_roots = roots;
        c.metrics.bind = Some("127.0.0.1:0".into());
    })
    .await;
    let admin = server.key(Permission::Admin).await;
    let writer = server.key(Permission::ReadWrite).await;
    let request = json!({"name": "Handbook", "type": "folder",
        "sync": {"path": docs, "exclude": ["**/*.tmp"], "intervalSeconds": 0}});

    // A read-write key may not make the server read its disk.
    assert_error(
        create(&server, &writer, request.clone()).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let response = create(&server, &admin, request).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let source = body(response).await;
    assert_eq!(source["type"], "folder");
    assert_eq!(source["sync"]["settings"]["exclude"], json!(["**/*.tmp"]));
    assert_eq!(source["sync"]["hasCredentials"], false);
    let id = source["id"].as_str().unwrap().to_owned();

    // The first run comes at once.
    let run = finished_run(&server, &admin, &id, 0).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(
        (run["added"].clone(), run["failed"].clone()),
        (json!(3), json!(0)),
        "{run}"
    );
    server.drain().await;
    let listed = server.documents(&admin, &id).await;
    let mut external: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["externalId"].as_str().unwrap())
        .collect();
    external.sort_unstable();
    assert_eq!(external, ["old.md", "pumps.md", "valves/gate.md"]);
    let pumps = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["externalId"] == "pumps.md")
        .unwrap()["id"]
        .clone();
    assert!(listed[0]["metadata"]["modifiedAt"].is_string(), "{listed}");

    // The folder changes: one file edited, one deleted, one added.
    write(
        &docs,
        "pumps.md",
        "# Pumps\n\nVent the casing before starting the pump.\n",
    );
    std::fs::remove_file(docs.join("old.md")).unwrap();
    write(
        &docs,
        "valves/check.md",
        "# Check valves\n\nMind the flow arrow.\n",
    );
    let started = server
        .post_json(&writer, &format!("/api/v1/sources/{id}/sync"), &json!({}))
        .await;
    assert_eq!(started.status(), StatusCode::ACCEPTED);
    assert_eq!(body(started).await["status"], "running");
    let run = finished_run(&server, &admin, &id, 1).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let counts: Vec<Value> = ["added", "updated", "deleted", "unchanged", "failed"]
        .iter()
        .map(|k| run[*k].clone())
        .collect();
    assert_eq!(
        counts,
        [json!(1), json!(1), json!(1), json!(1), json!(0)],
        "{run}"
    );
    server.drain().await;
    let listed = server.documents(&admin, &id).await;
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    let updated = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["externalId"] == "pumps.md")
        .unwrap();
    assert_eq!(updated["id"], pumps, "the same document");
    assert_eq!(updated["version"], 2, "{updated}");
    let found = body(
        server
            .search(&admin, json!({"query": "vent the casing"}))
            .await,
    )
    .await;
    assert_eq!(found["results"][0]["document"]["id"], pumps, "{found}");

    // Prometheus counts the runs, their items and the bytes fetched (the counters are the
    // test process's, shared with the other tests: at least this test's own).
    let metrics = server.metrics_addr.expect("metrics.bind is set");
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str, labels: &[(&str, &str)]| {
        crate::metrics::value(&text, name, labels).unwrap_or_else(|| panic!("{name}: {text}"))
    };
    assert!(value("quire_sync_runs_total", &[("status", "succeeded")]) >= 2.0);
    assert!(value("quire_sync_items_total", &[("outcome", "added")]) >= 4.0);
    assert!(value("quire_sync_items_total", &[("outcome", "deleted")]) >= 1.0);
    assert!(value("quire_sync_fetched_bytes_total", &[]) > 100.0);

    // The detail shows the last run and no next one (on demand only).
    let detail = body(server.get(&admin, &format!("/api/v1/sources/{id}")).await).await;
    assert_eq!(detail["sync"]["lastRun"]["id"], run["id"]);
    assert_eq!(detail["sync"]["nextRunAt"], Value::Null);
}

#[tokio::test]
async fn syncing_sources_are_refused_with_reasons() {
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| c.connectors.folder_roots = roots).await;
    let admin = server.key(Permission::Admin).await;
    for (request, needle) in [
        (
            json!({"name": "X", "type": "folder", "sync": {"path": elsewhere.path()}}),
            "root",
        ),
        (
            json!({"name": "X", "type": "folder", "sync": {"path": root.path(), "depth": 3}}),
            "depth",
        ),
        (json!({"name": "X", "type": "folder"}), "sync"),
        (
            json!({"name": "X", "sync": {"path": root.path()}}),
            "network",
        ),
        (
            json!({"name": "X", "type": "s3", "sync": {"url": "http://bucket"}}),
            "s3://",
        ),
        (
            json!({"name": "X", "type": "folder", "sync": {"path": root.path(), "include": ["[z-a]"]}}),
            "[z-a]",
        ),
        (
            json!({"name": "X", "type": "folder", "sync": {"path": root.path(), "intervalSeconds": -1}}),
            "intervalSeconds",
        ),
    ] {
        let refused = assert_error(
            create(&server, &admin, request.clone()).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
        let message = refused["message"].as_str().unwrap();
        assert!(message.contains(needle), "{request}: {message}");
    }
    // A network source cannot be asked to sync and lists no runs.
    let network = server.create_source(&admin, "Plain").await;
    assert_error(
        server
            .post_json(
                &admin,
                &format!("/api/v1/sources/{network}/sync"),
                &json!({}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    let runs = body(
        server
            .get(&admin, &format!("/api/v1/sources/{network}/syncs"))
            .await,
    )
    .await;
    assert_eq!(runs, json!([]));
    // A key scoped elsewhere does not see the runs.
    let folder = body(
        create(
            &server,
            &admin,
            json!({"name": "F", "type": "folder", "sync": {"path": root.path(), "intervalSeconds": 0}}),
        )
        .await,
    )
    .await;
    let folder = folder["id"].as_str().unwrap().to_owned();
    let scoped = server
        .key_with(
            Permission::Admin,
            SourceScope::only([crate::helpers::source_id(&network)]),
            None,
        )
        .await;
    assert_error(
        server
            .get(&scoped, &format!("/api/v1/sources/{folder}/syncs"))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

/// An S3 source's secret key is sealed: never answered, and not readable in the database.
#[tokio::test]
async fn an_s3_sources_credentials_are_never_shown_nor_stored_in_clear() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY";
    let response = create(
        &server,
        &admin,
        json!({"name": "Bucket", "type": "s3", "sync": {
            "url": "s3://archive/reports/", "endpoint": "http://127.0.0.1:9", "region": "us-east-1",
            "accessKeyId": "AKIDEXAMPLE", "secretAccessKey": secret, "allowHttp": true,
            "intervalSeconds": 0}}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let text = response.text().await.unwrap();
    assert!(!text.contains(secret), "{text}");
    let source: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(source["sync"]["hasCredentials"], true);
    assert_eq!(source["sync"]["settings"]["accessKeyId"], "AKIDEXAMPLE");
    let id = source["id"].as_str().unwrap();
    let detail = server
        .get(&admin, &format!("/api/v1/sources/{id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(!detail.contains(secret), "{detail}");
    // The origin is unreachable: the run fails with the reason, the service goes on.
    let run = finished_run(&server, &admin, id, 0).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert!(run["error"].as_str().unwrap().contains("listed"), "{run}");
    if crate::helpers::store_url_for(server.data_dir.path()).is_none() {
        for entry in std::fs::read_dir(server.data_dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{} holds the secret in clear",
                    path.display()
                );
            }
        }
    }
}

/// The S3 test server's setting `variable` (what `scripts/s3-server start` exports).
pub(crate) fn s3(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        panic!(
            "{variable} is not set: the S3 tests need a server; run `eval \"$(scripts/s3-server start)\"` first"
        )
    })
}

/// An S3 source follows its prefix: objects put there (through the test server's own data
/// directory) become documents, a changed one a new version, a removed one a deletion, and
/// keys outside the prefix or excluded are not taken.
#[tokio::test]
async fn an_s3_source_follows_its_bucket_prefix() {
    let bucket = s3("QUIRE_TEST_S3_BUCKET");
    let prefix = format!("sync-{}", uuid::Uuid::new_v4().simple());
    let data = Path::new(&s3("QUIRE_TEST_S3_SERVER_DIR"))
        .join("data")
        .join(&bucket);
    let objects = data.join(&prefix);
    write(
        &objects,
        "manuals/pump.md",
        "# Pump\n\nPrime the pump before starting.\n",
    );
    write(
        &objects,
        "manuals/valve.md",
        "# Valve\n\nOpen the valve slowly.\n",
    );
    write(&objects, "scratch.log", "not a document");
    write(
        &data.join(format!("{prefix}-other")),
        "stray.md",
        "# Stray\n",
    );
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let source = body(
        create(
            &server,
            &admin,
            json!({"name": "Bucket", "type": "s3", "sync": {
                "url": format!("s3://{bucket}/{prefix}/"),
                "endpoint": s3("QUIRE_TEST_S3_ENDPOINT"), "region": "us-east-1",
                "accessKeyId": s3("QUIRE_TEST_S3_ACCESS_KEY_ID"),
                "secretAccessKey": s3("QUIRE_TEST_S3_SECRET_ACCESS_KEY"),
                "allowHttp": true, "exclude": ["**/*.log"], "intervalSeconds": 0}}),
        )
        .await,
    )
    .await;
    let id = source["id"].as_str().unwrap().to_owned();
    let run = finished_run(&server, &admin, &id, 0).await;
    assert_eq!(
        (run["status"].clone(), run["added"].clone()),
        (json!("succeeded"), json!(2)),
        "{run}"
    );
    server.drain().await;
    let mut keys: Vec<String> = server
        .documents(&admin, &id)
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["externalId"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            format!("{prefix}/manuals/pump.md"),
            format!("{prefix}/manuals/valve.md")
        ]
    );

    write(
        &objects,
        "manuals/pump.md",
        "# Pump\n\nVent the pump casing before starting.\n",
    );
    std::fs::remove_file(objects.join("manuals/valve.md")).unwrap();
    let started = server
        .post_json(&admin, &format!("/api/v1/sources/{id}/sync"), &json!({}))
        .await;
    assert_eq!(started.status(), StatusCode::ACCEPTED);
    let run = finished_run(&server, &admin, &id, 1).await;
    let counts: Vec<Value> = ["added", "updated", "deleted", "failed"]
        .iter()
        .map(|k| run[*k].clone())
        .collect();
    assert_eq!(counts, [json!(0), json!(1), json!(1), json!(0)], "{run}");
    server.drain().await;
    let listed = server.documents(&admin, &id).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["version"], 2, "{listed}");
    std::fs::remove_dir_all(&objects).ok();
    std::fs::remove_dir_all(data.join(format!("{prefix}-other"))).ok();
}

#[tokio::test]
async fn an_admin_changes_how_a_source_syncs_and_the_next_run_follows_the_new_settings() {
    let root = tempfile::tempdir().unwrap();
    let docs = root.path().join("docs");
    write(&docs, "pumps.md", "# Pumps\n\nPrime the pump.\n");
    write(&docs, "draft.txt", "A draft about valves.");
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| c.connectors.folder_roots = roots).await;
    let admin = server.key(Permission::Admin).await;
    let writer = server.key(Permission::ReadWrite).await;
    let response = create(
        &server,
        &admin,
        json!({"name": "Handbook", "type": "folder",
            "sync": {"path": docs, "intervalSeconds": 0}}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = body(response).await["id"].as_str().unwrap().to_owned();
    let first = finished_run(&server, &admin, &id, 0).await;
    assert_eq!(first["added"], 2, "{first}");
    let path = format!("/api/v1/sources/{id}/sync");
    let settings = json!({"path": docs, "exclude": ["**/*.txt"], "intervalSeconds": 600});

    // Only an admin key may change it, and bad settings change nothing.
    assert_error(
        server.patch_json(&writer, &path, &settings).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let outside = json!({"path": std::env::temp_dir().join("elsewhere"), "intervalSeconds": 0});
    assert_error(
        server.patch_json(&admin, &path, &outside).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_error(
        server
            .patch_json(&admin, &path, &json!({"path": docs, "maxPages": 3}))
            .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    let network = server.create_source(&admin, "Uploads").await;
    assert_error(
        server
            .patch_json(
                &admin,
                &format!("/api/v1/sources/{network}/sync"),
                &settings,
            )
            .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    let unchanged = body(server.get(&admin, &format!("/api/v1/sources/{id}")).await).await;
    assert_eq!(
        unchanged["sync"]["settings"]["intervalSeconds"], 0,
        "{unchanged}"
    );

    // The change is shown at once and the next run, which comes at once, follows it: the
    // file the new pattern leaves out goes, like a file gone from the folder.
    let response = server.patch_json(&admin, &path, &settings).await;
    assert_eq!(response.status(), StatusCode::OK);
    let changed = body(response).await;
    assert_eq!(
        changed["sync"]["settings"]["exclude"],
        json!(["**/*.txt"]),
        "{changed}"
    );
    assert_eq!(
        changed["sync"]["settings"]["intervalSeconds"], 600,
        "{changed}"
    );
    let second = finished_run(&server, &admin, &id, 1).await;
    assert_eq!(
        (
            second["deleted"].clone(),
            second["unchanged"].clone(),
            second["failed"].clone()
        ),
        (json!(1), json!(1), json!(0)),
        "{second}"
    );
    server.drain().await;
    let listed = server.documents(&admin, &id).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["externalId"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pumps.md"]);
    let after = body(server.get(&admin, &format!("/api/v1/sources/{id}")).await).await;
    assert!(after["sync"]["nextRunAt"].is_string(), "{after}");
}
