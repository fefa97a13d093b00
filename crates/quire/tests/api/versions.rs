//! Documents that stay current: external ids, new versions by upload or `PUT`, the live
//! version searchable until the new one is ready and then switched in one step, a failed
//! version leaving the live one in place, and `document.deleted`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quire_core::Permission;
use reqwest::StatusCode;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::helpers::webhook_receiver::Receiver;
use crate::helpers::{TestServer, assert_error, body};

/// A multipart form of `file` with optional `externalId` and `metadata` fields.
fn form(name: &str, bytes: &[u8], external_id: Option<&str>, metadata: Option<&str>) -> Form {
    let mut form = Form::new();
    if let Some(id) = external_id {
        form = form.text("externalId", id.to_owned());
    }
    if let Some(metadata) = metadata {
        form = form.text("metadata", metadata.to_owned());
    }
    form.part(
        "file",
        Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    )
}

async fn upload(server: &TestServer, key: &str, source: &str, form: Form) -> reqwest::Response {
    server
        .client
        .post(server.url(&format!("/api/v1/sources/{source}/documents/upload")))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

async fn put(server: &TestServer, key: &str, path: &str, form: Form) -> reqwest::Response {
    server
        .client
        .put(server.url(path))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

/// Polls the document until `done` holds for it (or fails the test after 20 s).
async fn wait_until(
    server: &TestServer,
    key: &str,
    path: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    crate::helpers::poll(Duration::from_secs(20), what, || async {
        let current = body(server.get(key, path).await).await;
        done(&current).then_some(current)
    })
    .await
}

/// The contents of the results for `query` that belong to document `doc`.
async fn found(server: &TestServer, key: &str, query: &str, doc: &str) -> Vec<String> {
    let response = server
        .search(key, json!({"query": query, "limit": 10}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let response = body(response).await;
    response["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["document"]["id"] == doc)
        .map(|r| r["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_external_id_updates_the_document_in_place() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Policies").await;
    let v1 = b"# Travel policy\n\nEconomy class for flights under six hours.\n";
    let response = upload(
        &server,
        &key,
        &source,
        form(
            "travel.md",
            v1,
            Some("policies/travel.md"),
            Some(r#"{"dept": "hr"}"#),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let created = body(response).await;
    assert_eq!(created["externalId"], "policies/travel.md");
    assert_eq!(created["version"], 1);
    let doc = created["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    server.wait_for_status(&key, &source, &doc, "ready").await;
    assert_eq!(found(&server, &key, "economy flights", &doc).await.len(), 1);

    // The policy changes: the same external id, new bytes, no metadata field.
    let v2 = b"# Travel policy\n\nBusiness class is allowed for flights over four hours.\n";
    let response = upload(
        &server,
        &key,
        &source,
        form("travel-2025.md", v2, Some("policies/travel.md"), None),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let updated = body(response).await;
    assert_eq!(updated["id"], doc.as_str(), "the same document");
    let live = wait_until(&server, &key, &path, "version 2", |d| d["version"] == 2).await;
    assert_eq!(live["status"], "ready");
    assert_eq!(live["name"], "travel-2025.md");
    assert_eq!(
        live["metadata"],
        json!({"dept": "hr"}),
        "kept without a field"
    );
    assert!(live.get("nextVersion").is_none(), "{live}");
    let versions = live["versions"].as_array().unwrap();
    let summary: Vec<(Value, Value)> = versions
        .iter()
        .map(|v| (v["version"].clone(), v["status"].clone()))
        .collect();
    assert_eq!(
        summary,
        [(json!(1), json!("superseded")), (json!(2), json!("ready"))]
    );
    assert_eq!(versions[1]["size"], v2.len());
    assert_eq!(versions[0]["name"], "travel.md");

    // Searches find the new text only, and the listing has one document.
    assert!(found(&server, &key, "economy", &doc).await.is_empty());
    let hits = found(&server, &key, "business class", &doc).await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].contains("four hours"));
    assert_eq!(
        server
            .documents(&key, &source)
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let by_id = body(
        server
            .get(
                &key,
                &format!("/api/v1/sources/{source}/documents?externalId=policies%2Ftravel.md"),
            )
            .await,
    )
    .await;
    assert_eq!(by_id.as_array().unwrap().len(), 1);
    assert_eq!(by_id[0]["id"], doc.as_str());
    let none = body(
        server
            .get(
                &key,
                &format!("/api/v1/sources/{source}/documents?externalId=nope"),
            )
            .await,
    )
    .await;
    assert_eq!(none, json!([]));
    // The original is the live version's.
    let original = server.get(&key, &format!("{path}/original")).await;
    assert_eq!(original.status(), StatusCode::OK);
    assert_eq!(original.bytes().await.unwrap().as_ref(), v2);

    // The same bytes again: 200, nothing new; new metadata with them replaces the old.
    let response = upload(
        &server,
        &key,
        &source,
        form(
            "x.md",
            v2,
            Some("policies/travel.md"),
            Some(r#"{"dept": "legal"}"#),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let same = body(response).await;
    assert_eq!(
        (same["version"].clone(), same["metadata"].clone()),
        (json!(2), json!({"dept": "legal"}))
    );
    server.drain().await;
    let after = body(server.get(&key, &path).await).await;
    assert_eq!(after["versions"].as_array().unwrap().len(), 2);

    // Bad external ids are refused with a reason.
    let long = "x".repeat(513);
    assert_error(
        upload(
            &server,
            &key,
            &source,
            form("a.md", b"a", Some(&long), None),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_error(
        upload(&server, &key, &source, form("a.md", b"a", Some(""), None)).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
}

#[tokio::test]
async fn put_makes_a_version_and_a_failing_one_leaves_the_live_one() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let reader = server.key(Permission::Read).await;
    let source = server.create_source(&key, "Manuals").await;
    let doc = server
        .upload_ok(
            &key,
            &source,
            "pump.md",
            b"# Pump\n\nPrime the pump before starting.\n",
        )
        .await;
    server.wait_for_status(&key, &source, &doc, "ready").await;
    let path = format!("/api/v1/sources/{source}/documents/{doc}");

    // A broken PDF as version 2 fails; version 1 stays live and searchable.
    let response = put(
        &server,
        &key,
        &path,
        form("pump.pdf", b"%PDF-1.7 truncated", None, None),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let failed = wait_until(&server, &key, &path, "a failed version 2", |d| {
        d["nextVersion"]["status"] == "failed"
    })
    .await;
    assert_eq!(
        (failed["status"].clone(), failed["version"].clone()),
        (json!("ready"), json!(1))
    );
    assert_eq!(failed["nextVersion"]["version"], 2);
    assert!(
        failed["nextVersion"]["error"]
            .as_str()
            .unwrap()
            .contains("PDF"),
        "{failed}"
    );
    assert_eq!(failed["versions"][1]["status"], "failed");
    assert_eq!(found(&server, &key, "prime the pump", &doc).await.len(), 1);

    // A good version 3 replaces it, with metadata.
    let response = put(
        &server,
        &key,
        &path,
        form(
            "pump.md",
            b"# Pump\n\nVent the casing before starting.\n",
            None,
            Some(r#"{"rev": 3}"#),
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let live = wait_until(&server, &key, &path, "version 3", |d| d["version"] == 3).await;
    assert_eq!(live["metadata"], json!({"rev": 3}));
    assert!(live.get("nextVersion").is_none(), "{live}");
    let statuses: Vec<Value> = live["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [json!("superseded"), json!("failed"), json!("ready")]
    );
    assert_eq!(found(&server, &key, "vent casing", &doc).await.len(), 1);
    assert!(found(&server, &key, "prime", &doc).await.is_empty());

    // Refusals: a read key, an unknown document, no file, an external id.
    assert_error(
        put(&server, &reader, &path, form("a.md", b"a", None, None)).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let missing = format!(
        "/api/v1/sources/{source}/documents/{}",
        uuid::Uuid::new_v4()
    );
    assert_error(
        put(&server, &key, &missing, form("a.md", b"a", None, None)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let no_file = Form::new().text("metadata", "{}");
    assert_error(
        put(&server, &key, &path, no_file).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_error(
        put(&server, &key, &path, form("a.md", b"a", Some("x"), None)).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
}

/// Searches running through a version switch always find the document exactly once: the old
/// text until the switch, the new one after it.
#[tokio::test]
async fn a_switch_never_leaves_the_document_missing_or_found_twice() {
    let server = Arc::new(TestServer::start().await);
    // Searches run back to back until the switch: far beyond the default rate limit.
    let key = server
        .key_with(
            Permission::ReadWrite,
            quire_core::SourceScope::All,
            Some(1_000_000),
        )
        .await;
    let source = server.create_source(&key, "Notes").await;
    let doc = server
        .upload_ok(
            &key,
            &source,
            "note.md",
            b"Lighthouse keeper log: alpha edition.\n",
        )
        .await;
    server.wait_for_status(&key, &source, &doc, "ready").await;
    let path = format!("/api/v1/sources/{source}/documents/{doc}");

    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (server, key, doc, done) = (
            Arc::clone(&server),
            key.clone(),
            doc.clone(),
            Arc::clone(&done),
        );
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let hits = found(&server, &key, "lighthouse keeper log", &doc).await;
                assert_eq!(hits.len(), 1, "missing or found twice: {hits:?}");
                seen.push(hits[0].contains("beta"));
            }
            seen
        })
    };
    let response = put(
        &server,
        &key,
        &path,
        form(
            "note.md",
            b"Lighthouse keeper log: beta edition.\n",
            None,
            None,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    wait_until(&server, &key, &path, "version 2", |d| d["version"] == 2).await;
    // A few more searches after the switch.
    for _ in 0..5 {
        let hits = found(&server, &key, "lighthouse keeper log", &doc).await;
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert!(hits[0].contains("beta"), "{hits:?}");
    }
    done.store(true, Ordering::Relaxed);
    let seen = watcher.await.unwrap();
    assert!(!seen.is_empty());
    // Once the new text was found, the old one never came back.
    let first_new = seen.iter().position(|b| *b).unwrap_or(seen.len());
    assert!(seen[first_new..].iter().all(|b| *b), "{seen:?}");
}

#[tokio::test]
async fn versions_and_deletions_are_announced() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(|c| c.webhooks.allow_private_targets = true).await;
    let admin = server.key(Permission::Admin).await;
    let created = body(
        server
            .post_json(
                &admin,
                "/api/v1/webhooks",
                &json!({"url": url, "events": ["document.ready", "document.deleted"]}),
            )
            .await,
    )
    .await;
    *receiver.secret.lock().unwrap() = created["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "Manuals").await;
    let response = upload(
        &server,
        &admin,
        &source,
        form("a.md", b"first text", Some("a"), None),
    )
    .await;
    let doc = body(response).await["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    server.wait_for_status(&admin, &source, &doc, "ready").await;
    upload(
        &server,
        &admin,
        &source,
        form("a.md", b"second text", Some("a"), None),
    )
    .await;
    wait_until(&server, &admin, &path, "version 2", |d| d["version"] == 2).await;
    assert_eq!(
        server.delete(&admin, &path).await.status(),
        StatusCode::NO_CONTENT
    );
    server.drain().await;

    let events: Vec<(Value, Value)> = receiver
        .received()
        .iter()
        .map(|(_, b)| (b["event"].clone(), b["data"]["version"].clone()))
        .collect();
    assert_eq!(
        events,
        [
            (json!("document.ready"), json!(1)),
            (json!("document.ready"), json!(2)),
            (json!("document.deleted"), json!(2)),
        ]
    );
    let deleted = &receiver.received()[2].1;
    assert_eq!(
        deleted["data"],
        json!({
            "documentId": doc,
            "documentName": "a.md",
            "dataSourceId": source,
            "dataSourceName": "Manuals",
            "version": 2,
        })
    );
    // Every version's original went with it.
    assert_eq!(server.stored_files().1, 0);
}

/// A bulk upload's `externalId` field names the file part after it.
#[tokio::test]
async fn bulk_uploads_take_an_external_id_per_file() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Sync").await;
    let bulk = Form::new()
        .text("externalId", "docs/a.md")
        .part("file", Part::bytes(b"alpha".to_vec()).file_name("a.md"))
        .part("file", Part::bytes(b"beta".to_vec()).file_name("b.md"));
    let answer = body(server.upload_bulk(&key, &source, bulk).await).await;
    assert_eq!(answer["accepted"], 2, "{answer}");
    assert_eq!(answer["results"][0]["document"]["externalId"], "docs/a.md");
    assert_eq!(answer["results"][1]["document"]["externalId"], Value::Null);
    let again = Form::new()
        .text("externalId", "docs/a.md")
        .part("file", Part::bytes(b"alpha 2".to_vec()).file_name("a.md"));
    let answer = body(server.upload_bulk(&key, &source, again).await).await;
    assert_eq!(answer["results"][0]["status"], "accepted");
    assert_eq!(
        answer["results"][0]["document"]["id"],
        body(
            server
                .get(
                    &key,
                    &format!("/api/v1/sources/{source}/documents?externalId=docs%2Fa.md")
                )
                .await
        )
        .await[0]["id"]
    );
    let dangling = Form::new()
        .part("file", Part::bytes(b"c".to_vec()).file_name("c.md"))
        .text("externalId", "late");
    assert_error(
        server.upload_bulk(&key, &source, dangling).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_eq!(
        server
            .documents(&key, &source)
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
