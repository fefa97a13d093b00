//! Personal data held for review, over the real API and CLI: a CV waits in `pending_review`
//! (not searchable, `document.pii_detected` sent once), then approve, redact or reject; headings
//! and document names are screened too, and a decision leaves only masked findings.

use std::time::{Duration, Instant};

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::helpers::webhook_receiver::Receiver;
use crate::helpers::{TestServer, assert_error, body};

/// A CV the default policy holds for review (a name, an e-mail address, a phone number).
pub(crate) const CV: &str = "# Curriculum vitae\n\nJane Doe\n\nEmail: jane.doe@example.com\n\nPhone: +44 20 7946 0958\n\nTen years of centrifugal pump maintenance at the Leeds works.\n";

async fn held_cv(server: &TestServer, key: &str) -> (String, String) {
    let source = server.create_source(key, "People").await;
    let id = server.upload_ok(key, &source, "cv.md", CV.as_bytes()).await;
    let doc = server
        .wait_for_status(key, &source, &id, "pending_review")
        .await;
    assert_eq!(doc["chunkCount"], 0, "{doc}");
    (source, id)
}

async fn search_names(server: &TestServer, key: &str, query: &str) -> Vec<String> {
    let found = body(server.search(key, json!({"query": query})).await).await;
    found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["content"].as_str().unwrap().to_owned())
        .collect()
}

async fn post(server: &TestServer, key: &str, path: &str) -> reqwest::Response {
    server.post_json(key, path, &json!({})).await
}

#[tokio::test]
async fn a_cv_waits_for_review_and_approval_makes_it_searchable() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(|c| c.webhooks.allow_private_targets = true).await;
    let admin = server.key(Permission::Admin).await;
    let writer = server.key(Permission::ReadWrite).await;
    let hook = body(
        server
            .post_json(
                &admin,
                "/api/v1/webhooks",
                &json!({"url": url, "events": ["document.pii_detected", "document.ready"]}),
            )
            .await,
    )
    .await;
    *receiver.secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
    let (source, id) = held_cv(&server, &admin).await;
    assert!(
        search_names(&server, &admin, "centrifugal pump maintenance")
            .await
            .is_empty()
    );

    assert_error(
        server.get(&writer, "/api/v1/reviews").await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let waiting = body(server.get(&admin, "/api/v1/reviews").await).await;
    assert_eq!(waiting.as_array().unwrap().len(), 1, "{waiting}");
    assert_eq!(waiting[0]["document"]["id"], id.as_str());
    let types = waiting[0]["piiTypes"].as_array().unwrap();
    assert!(
        types.contains(&json!("email")) && types.contains(&json!("phone")),
        "{waiting}"
    );

    let detail = body(server.get(&admin, &format!("/api/v1/reviews/{id}")).await).await;
    let email = detail["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["type"] == "email")
        .expect("the e-mail finding");
    assert_eq!(email["text"], "jane.doe@example.com");
    assert!(
        email["context"]
            .as_str()
            .unwrap()
            .contains("Email: jane.doe@example.com")
    );

    let count = detail["findingCount"].as_u64().unwrap();
    let approved = post(&server, &admin, &format!("/api/v1/reviews/{id}/approve")).await;
    assert_eq!(approved.status(), StatusCode::OK);
    server.wait_for_status(&admin, &source, &id, "ready").await;
    // Decided: the review keeps types, counts and masked excerpts, not the found text.
    let decided = body(server.get(&admin, &format!("/api/v1/reviews/{id}")).await).await;
    assert_no_found_text(&decided);
    assert_eq!(decided["decision"], "approve", "{decided}");
    assert_eq!(decided["findingCount"].as_u64(), Some(count), "{decided}");
    let email = decided["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["type"] == "email")
        .expect("the reduced e-mail entry");
    assert_eq!(
        (&email["count"], &email["excerpt"], &email["in"]),
        (&json!(1), &json!("j***.***@*******.*om"), &json!(["text"])),
        "{decided}"
    );
    let found = search_names(&server, &admin, "centrifugal pump maintenance").await;
    assert!(
        found.iter().any(|c| c.contains("jane.doe@example.com")),
        "{found:?}"
    );
    // Decided once: a second decision is a conflict.
    assert_error(
        post(&server, &admin, &format!("/api/v1/reviews/{id}/redact")).await,
        StatusCode::CONFLICT,
        "conflict",
    )
    .await;
    assert!(
        body(server.get(&admin, "/api/v1/reviews").await)
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );

    // document.pii_detected once, with its types, then document.ready after the approval, and
    // nothing more once every job has ended and every event has been delivered.
    server.drain().await;
    let events: Vec<Value> = receiver.received().into_iter().map(|(_, e)| e).collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["event"], "document.pii_detected");
    assert_eq!(
        events[0]["data"],
        json!({"documentId": id, "documentName": "cv.md", "dataSourceId": source,
               "dataSourceName": "People", "piiTypes": types})
    );
    assert_eq!(events[1]["event"], "document.ready");
}

/// Fails when `review` still carries any of the CV's found text (or its context).
fn assert_no_found_text(review: &Value) {
    let text = review.to_string();
    for raw in [
        "jane.doe@example.com",
        "7946 0958",
        "Jane Doe",
        "Email:",
        "context",
    ] {
        assert!(!text.contains(raw), "{raw:?} is still in {review}");
    }
}

/// Search hits for `query` as JSON text, to look for what must (not) be in them.
async fn search_json(server: &TestServer, key: &str, query: &str) -> Value {
    body(server.search(key, json!({"query": query})).await).await
}

#[tokio::test]
async fn personal_data_in_a_heading_is_held_and_redacted_in_section_paths() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let source = server.create_source(&admin, "Payments").await;
    let text = "# Card 4111 1111 1111 1111 and SSN 123-45-6789\n\n\
                Prime the centrifugal pump before starting it.\n";
    let id = server
        .upload_ok(&admin, &source, "pumps.md", text.as_bytes())
        .await;
    server
        .wait_for_status(&admin, &source, &id, "pending_review")
        .await;
    let detail = body(server.get(&admin, &format!("/api/v1/reviews/{id}")).await).await;
    assert_eq!(
        detail["piiTypes"],
        json!(["credit_card", "us_ssn"]),
        "{detail}"
    );
    assert!(
        detail["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["in"] == "section"),
        "{detail}"
    );

    let redacted = post(&server, &admin, &format!("/api/v1/reviews/{id}/redact")).await;
    assert_eq!(redacted.status(), StatusCode::OK);
    server.wait_for_status(&admin, &source, &id, "ready").await;
    let found = search_json(&server, &admin, "prime the centrifugal pump").await;
    let top = &found["results"][0];
    assert_eq!(
        top["metadata"]["section"], "Card [CREDIT_CARD] and SSN [US_SSN]",
        "{found}"
    );
    // The numbers as written: a bare "4111" or "6789" may turn up inside a random id.
    let all = found.to_string();
    assert!(
        !all.contains("4111 1111") && !all.contains("123-45-6789"),
        "{found}"
    );
    let decided = body(server.get(&admin, &format!("/api/v1/reviews/{id}")).await).await;
    let decided_text = decided.to_string();
    assert!(
        !decided_text.contains("4111 1111") && !decided_text.contains("123-45-6789"),
        "{decided}"
    );
    assert_eq!(decided["findingCount"], 2, "{decided}");
}

#[tokio::test]
async fn personal_data_in_a_document_name_holds_it_and_redact_renames_it() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(|c| c.webhooks.allow_private_targets = true).await;
    let admin = server.key(Permission::Admin).await;
    let hook = body(
        server
            .post_json(
                &admin,
                "/api/v1/webhooks",
                &json!({"url": url, "events": ["document.pii_detected"]}),
            )
            .await,
    )
    .await;
    *receiver.secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "Payments").await;
    let card = server
        .upload_ok(
            &admin,
            &source,
            "statement 4111-1111-1111-1111.md",
            b"Prime the centrifugal pump before starting it.\n",
        )
        .await;
    let mail = server
        .upload_ok(
            &admin,
            &source,
            "notes for jane.doe@example.com.md",
            b"Replace the pump seal every two years.\n",
        )
        .await;
    for id in [&card, &mail] {
        server
            .wait_for_status(&admin, &source, id, "pending_review")
            .await;
    }
    let detail = body(server.get(&admin, &format!("/api/v1/reviews/{mail}")).await).await;
    assert_eq!(detail["piiTypes"], json!(["email"]), "{detail}");
    assert_eq!(detail["findings"][0]["in"], "name", "{detail}");
    assert_eq!(detail["findings"][0]["text"], "jane.doe@example.com");

    // While they wait, listings and the announcement show the names masked; only the
    // reviewer's findings hold what was found.
    let listed = server.documents(&admin, &source).await;
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["notes for [EMAIL].md", "statement [CREDIT_CARD].md"],
        "{listed}"
    );
    assert_eq!(
        detail["document"]["name"], "notes for [EMAIL].md",
        "{detail}"
    );
    let started = Instant::now();
    while receiver.received().len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut announced: Vec<String> = receiver
        .received()
        .into_iter()
        .map(|(_, e)| e["data"]["documentName"].as_str().unwrap().to_owned())
        .collect();
    announced.sort_unstable();
    assert_eq!(
        announced,
        ["notes for [EMAIL].md", "statement [CREDIT_CARD].md"]
    );

    // Redact: the stored name loses the number, the extension stays.
    let redacted =
        body(post(&server, &admin, &format!("/api/v1/reviews/{card}/redact")).await).await;
    assert_eq!(redacted["name"], "statement [CREDIT_CARD].md", "{redacted}");
    let doc = server
        .wait_for_status(&admin, &source, &card, "ready")
        .await;
    assert_eq!(doc["name"], "statement [CREDIT_CARD].md", "{doc}");
    let found = search_json(&server, &admin, "prime the centrifugal pump").await;
    assert!(
        found.to_string().contains("statement [CREDIT_CARD].md")
            && !found.to_string().contains("4111-1111-1111"),
        "{found}"
    );
    let decided = body(server.get(&admin, &format!("/api/v1/reviews/{card}")).await).await;
    assert!(!decided.to_string().contains("4111-1111"), "{decided}");
    assert_eq!(decided["findings"][0]["excerpt"], "4***-****-****-**11");

    // Approve: the administrator has seen the name, which stays as uploaded.
    let approved = post(&server, &admin, &format!("/api/v1/reviews/{mail}/approve")).await;
    assert_eq!(approved.status(), StatusCode::OK);
    let doc = server
        .wait_for_status(&admin, &source, &mail, "ready")
        .await;
    assert_eq!(doc["name"], "notes for jane.doe@example.com.md", "{doc}");
    let decided = body(server.get(&admin, &format!("/api/v1/reviews/{mail}")).await).await;
    assert_eq!(
        decided["document"]["name"], "notes for jane.doe@example.com.md",
        "{decided}"
    );
    assert_eq!(
        decided["findings"],
        json!([{"type": "email", "count": 1, "in": ["name"], "excerpt": "j***.***@*******.*om"}])
    );
}

#[tokio::test]
async fn redaction_indexes_placeholders_and_keeps_the_original() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let (source, id) = held_cv(&server, &admin).await;
    let redacted = post(&server, &admin, &format!("/api/v1/reviews/{id}/redact")).await;
    assert_eq!(redacted.status(), StatusCode::OK);
    server.wait_for_status(&admin, &source, &id, "ready").await;
    let found = search_names(&server, &admin, "centrifugal pump maintenance").await;
    let text = found.join("\n");
    assert!(
        text.contains("[EMAIL]") && text.contains("[PHONE]"),
        "{text}"
    );
    assert!(
        !text.contains("jane.doe@example.com") && !text.contains("7946"),
        "{text}"
    );
    assert!(
        search_names(&server, &admin, "jane.doe@example.com")
            .await
            .iter()
            .all(|c| !c.contains("jane.doe"))
    );
    assert_no_found_text(&body(server.get(&admin, &format!("/api/v1/reviews/{id}")).await).await);
    // The original file is kept as uploaded.
    let original = server.data_dir.path().join("files").join(&id);
    assert_eq!(std::fs::read_to_string(original).unwrap(), CV);
}

#[tokio::test]
async fn rejection_deletes_the_document_and_its_file() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let (source, id) = held_cv(&server, &admin).await;
    let rejected = post(&server, &admin, &format!("/api/v1/reviews/{id}/reject")).await;
    assert_eq!(rejected.status(), StatusCode::NO_CONTENT);
    assert_error(
        server
            .get(&admin, &format!("/api/v1/sources/{source}/documents/{id}"))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_eq!(server.stored_files().1, 0);
    assert_error(
        post(&server, &admin, &format!("/api/v1/reviews/{id}/approve")).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_scoped_admin_key_sees_and_decides_reviews_only_in_its_sources() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let (_, held_elsewhere) = held_cv(&server, &admin).await;
    let own_source = server.create_source(&admin, "Team A").await;
    let scoped = server
        .key_with(
            Permission::Admin,
            SourceScope::only([crate::helpers::source_id(&own_source)]),
            None,
        )
        .await;

    let listed = body(server.get(&scoped, "/api/v1/reviews").await).await;
    assert_eq!(
        listed,
        json!([]),
        "a review outside the key's scope was listed"
    );
    for path in [
        format!("/api/v1/reviews/{held_elsewhere}"),
        format!("/api/v1/reviews/{held_elsewhere}/approve"),
        format!("/api/v1/reviews/{held_elsewhere}/redact"),
        format!("/api/v1/reviews/{held_elsewhere}/reject"),
    ] {
        let response = if path.ends_with(held_elsewhere.as_str()) {
            server.get(&scoped, &path).await
        } else {
            post(&server, &scoped, &path).await
        };
        let error = assert_error(response, StatusCode::NOT_FOUND, "not_found").await;
        assert!(
            !error.to_string().contains("pending_review"),
            "{path}: {error}"
        );
    }
    // Untouched: the unscoped administrator still finds it waiting.
    let review = body(
        server
            .get(&admin, &format!("/api/v1/reviews/{held_elsewhere}"))
            .await,
    )
    .await;
    assert_eq!(review["document"]["status"], "pending_review", "{review}");
    assert!(review["decision"].is_null(), "{review}");
}

async fn quire(data_dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("QUIRE_DATA_DIR")
        .envs(crate::helpers::store_env(data_dir))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[tokio::test]
async fn the_cli_lists_shows_and_decides_while_the_server_runs() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let (source, id) = held_cv(&server, &admin).await;
    let dir = server.data_dir.path().to_owned();
    let (ok, out) = quire(&dir, &["review", "list", "--json"]).await;
    assert!(ok, "{out}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["documentId"], id.as_str());
    let (ok, out) = quire(&dir, &["review", "show", &id]).await;
    assert!(
        ok && out.contains("jane.doe@example.com") && out.contains("email"),
        "{out}"
    );
    let (ok, out) = quire(&dir, &["review", "redact", &id]).await;
    assert!(ok, "{out}");
    // The running server's worker picks the decision up. The CLI dates it by the wall clock;
    // bring the test server's clock there too.
    server
        .clock
        .set(chrono::Utc::now() + chrono::Duration::seconds(1));
    let started = Instant::now();
    loop {
        let doc = body(
            server
                .get(&admin, &format!("/api/v1/sources/{source}/documents/{id}"))
                .await,
        )
        .await;
        if doc["status"] == "ready" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{doc}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (ok, out) = quire(&dir, &["review", "approve", &id]).await;
    assert!(!ok && out.contains("not waiting for review"), "{out}");
    // The decision reduced what the review keeps.
    let (ok, out) = quire(&dir, &["review", "show", &id]).await;
    assert!(
        ok && !out.contains("jane.doe@example.com") && out.contains("j***.***@*******.*om"),
        "{out}"
    );
    let (ok, out) = quire(&dir, &["review", "show", &id, "--json"]).await;
    assert!(ok, "{out}");
    assert_no_found_text(&serde_json::from_str(&out).unwrap());
}
