//! The admin pages that act: sources and uploads, documents, the review queue and webhooks,
//! each through its forms with the session's CSRF token, each leaving an audit entry.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION};
use reqwest::multipart::{Form, Part};
use serde_json::Value;

use super::{PASSWORD, client, get_page, post_form, set_password, sign_in};
use crate::helpers::TestServer;

const CV: &str = "# CV\n\nJane Doe\n\nEmail: jane.doe@example.com\n\nPhone: +44 20 7946 0958\n";

/// A signed-in server: (server, session cookie, CSRF token).
async fn signed_in(allow_private_targets: bool) -> (TestServer, String, String) {
    let server =
        TestServer::start_with(|c| c.webhooks.allow_private_targets = allow_private_targets).await;
    set_password(&server, PASSWORD).await;
    let (cookie, csrf) = sign_in(&server).await;
    (server, cookie, csrf)
}

fn location(response: &reqwest::Response) -> String {
    response.headers()[LOCATION].to_str().unwrap().to_owned()
}

async fn text(server: &TestServer, path: &str, cookie: &str) -> String {
    let response = get_page(server, path, cookie).await;
    assert_eq!(response.status(), StatusCode::OK, "GET {path}");
    response.text().await.unwrap()
}

/// Creates a source through the form; returns its id.
async fn create_source(server: &TestServer, cookie: &str, csrf: &str, name: &str) -> String {
    let response = post_form(
        server,
        "/admin/sources",
        cookie,
        &[("csrf", csrf), ("name", name), ("description", "")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let to = location(&response);
    to.strip_prefix("/admin/sources/").unwrap().to_owned()
}

async fn upload(
    server: &TestServer,
    cookie: &str,
    csrf: Option<&str>,
    source: &str,
    files: &[(&str, &str)],
) -> reqwest::Response {
    let mut form = Form::new();
    if let Some(csrf) = csrf {
        form = form.text("csrf", csrf.to_owned());
    }
    for (name, content) in files {
        form = form.part(
            "files",
            Part::bytes(content.as_bytes().to_vec()).file_name((*name).to_owned()),
        );
    }
    client()
        .post(server.url(&format!("/admin/sources/{source}/upload")))
        .header(COOKIE, cookie)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

async fn statuses(server: &TestServer, cookie: &str, source: &str) -> Value {
    let response = get_page(server, &format!("/admin/sources/{source}/statuses"), cookie).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// Polls the statuses JSON until every document of the source has `status` (20 s at most).
async fn wait_all(
    server: &TestServer,
    cookie: &str,
    source: &str,
    count: usize,
    status: &str,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let all = statuses(server, cookie, source).await;
        let map = all.as_object().unwrap();
        if map.len() == count && map.values().all(|d| d["status"] == status) {
            return all;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "documents never became {status}: {all}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Uploads one file through the form and waits for it to reach `status`; returns its id.
async fn upload_one(
    server: &TestServer,
    cookie: &str,
    csrf: &str,
    source: &str,
    file: (&str, &str),
    status: &str,
) -> String {
    let response = upload(server, cookie, Some(csrf), source, &[file]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let all = wait_all(server, cookie, source, 1, status).await;
    all.as_object().unwrap().keys().next().unwrap().clone()
}

async fn audit_actions(server: &TestServer) -> Vec<String> {
    server
        .store
        .audit_log(1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect()
}

fn count(actions: &[String], action: &str) -> usize {
    actions.iter().filter(|a| *a == action).count()
}

#[tokio::test]
async fn sources_and_documents_are_managed_through_the_forms() {
    let (server, cookie, csrf) = signed_in(false).await;
    let page = text(&server, "/admin/sources", &cookie).await;
    assert!(page.contains(r#"id="new-source""#) && page.contains(r#"id="create-source""#));
    assert!(
        page.contains(r#"href="/admin/sources""#),
        "Sources is in the nav"
    );

    let source = create_source(&server, &cookie, &csrf, "Manuals").await;
    let page = text(&server, "/admin/sources", &cookie).await;
    assert!(
        page.contains(&format!(
            r#"class="source-link" href="/admin/sources/{source}">Manuals</a>"#
        )),
        "{page}"
    );
    let page = text(&server, &format!("/admin/sources/{source}"), &cookie).await;
    assert!(page.contains(r#"id="upload""#) && page.contains(r#"enctype="multipart/form-data""#));
    assert!(
        page.contains(r#"id="files" name="files" multiple"#),
        "{page}"
    );

    let response = upload(
        &server,
        &cookie,
        Some(&csrf),
        &source,
        &[
            (
                "pumps.md",
                "# Pumps\n\nPrime the centrifugal pump before starting it.\n",
            ),
            (
                "valves.txt",
                "Close the gate valve slowly to avoid water hammer.\n",
            ),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), format!("/admin/sources/{source}"));
    let all = wait_all(&server, &cookie, &source, 2, "ready").await;
    let ids: Vec<String> = all.as_object().unwrap().keys().cloned().collect();
    assert!(all[&ids[0]]["error"].is_null(), "{all}");

    let page = text(&server, &format!("/admin/sources/{source}"), &cookie).await;
    for id in &ids {
        assert!(
            page.contains(&format!(r#"<tr data-document-id="{id}">"#)),
            "{page}"
        );
    }
    assert!(page.contains(r#"<td class="status">ready</td>"#), "{page}");

    let docs = server
        .store
        .list_documents(&quire_core::SourceScope::All, source.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let pumps = docs.iter().find(|d| d.name == "pumps.md").unwrap().id;
    let detail = text(&server, &format!("/admin/documents/{pumps}"), &cookie).await;
    assert!(detail.contains(r#"data-page="1""#), "{detail}");
    assert!(detail.contains("Prime the centrifugal pump"), "{detail}");
    assert!(detail.contains(r#"id="delete-document""#), "{detail}");

    let delete = format!("/admin/documents/{pumps}/delete");
    let response = post_form(&server, &delete, &cookie, &[("csrf", &csrf)]).await;
    assert_eq!(
        response.status(),
        StatusCode::BAD_REQUEST,
        "needs the box ticked"
    );
    let response = post_form(
        &server,
        &delete,
        &cookie,
        &[("csrf", &csrf), ("confirm", "yes")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), format!("/admin/sources/{source}"));
    let all = statuses(&server, &cookie, &source).await;
    assert_eq!(all.as_object().unwrap().len(), 1, "{all}");
    assert!(all.get(pumps.to_string()).is_none());
    let response = get_page(&server, &format!("/admin/documents/{pumps}"), &cookie).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    let actions = audit_actions(&server).await;
    assert_eq!(count(&actions, "source.created"), 1, "{actions:?}");
    assert_eq!(count(&actions, "document.uploaded"), 2, "{actions:?}");
    assert_eq!(count(&actions, "document.deleted"), 1, "{actions:?}");
}

#[tokio::test]
async fn held_documents_are_approved_redacted_or_rejected_in_the_review_pages() {
    let (server, cookie, csrf) = signed_in(false).await;
    let mut held = Vec::new();
    for name in ["Approve", "Redact", "Reject"] {
        let source = create_source(&server, &cookie, &csrf, name).await;
        let id = upload_one(
            &server,
            &cookie,
            &csrf,
            &source,
            ("cv.md", CV),
            "pending_review",
        )
        .await;
        held.push((source, id));
    }
    let list = text(&server, "/admin/review", &cookie).await;
    for (_, id) in &held {
        assert!(
            list.contains(&format!(r#"class="review-link" href="/admin/review/{id}""#)),
            "{list}"
        );
    }
    let (source, id) = &held[0];
    let detail = text(&server, &format!("/admin/review/{id}"), &cookie).await;
    assert!(
        detail.contains("<mark>jane.doe@example.com</mark>"),
        "{detail}"
    );
    assert!(detail.contains(r#"id="decide""#) && detail.contains(r#"id="confirm-reject""#));
    for value in ["approve", "redact", "reject"] {
        assert!(detail.contains(&format!(r#"name="decision" value="{value}""#)));
    }

    let path = format!("/admin/review/{id}");
    let response = post_form(
        &server,
        &path,
        &cookie,
        &[("csrf", &csrf), ("decision", "approve")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/admin/review?done=approved");
    let flash = text(&server, "/admin/review?done=approved", &cookie).await;
    assert!(flash.contains(r#"id="flash""#), "{flash}");
    wait_all(&server, &cookie, source, 1, "ready").await;
    let page = text(&server, &format!("/admin/documents/{id}"), &cookie).await;
    assert!(page.contains("jane.doe@example.com"), "{page}");

    let (source, id) = &held[1];
    let path = format!("/admin/review/{id}");
    let response = post_form(
        &server,
        &path,
        &cookie,
        &[("csrf", &csrf), ("decision", "redact")],
    )
    .await;
    assert_eq!(location(&response), "/admin/review?done=redacted");
    wait_all(&server, &cookie, source, 1, "ready").await;
    let page = text(&server, &format!("/admin/documents/{id}"), &cookie).await;
    assert!(!page.contains("jane.doe@example.com"), "{page}");

    let (source, id) = &held[2];
    let path = format!("/admin/review/{id}");
    let response = post_form(
        &server,
        &path,
        &cookie,
        &[("csrf", &csrf), ("decision", "reject")],
    )
    .await;
    assert_eq!(
        response.status(),
        StatusCode::BAD_REQUEST,
        "needs the box ticked"
    );
    let fields = [
        ("csrf", csrf.as_str()),
        ("decision", "reject"),
        ("confirm_reject", "yes"),
    ];
    let response = post_form(&server, &path, &cookie, &fields).await;
    assert_eq!(location(&response), "/admin/review?done=rejected");
    let all = statuses(&server, &cookie, source).await;
    assert!(all.as_object().unwrap().is_empty(), "{all}");

    let list = text(&server, "/admin/review", &cookie).await;
    assert!(
        list.contains("No document is waiting for review."),
        "{list}"
    );
    let actions = audit_actions(&server).await;
    for action in ["review.approved", "review.redacted", "review.rejected"] {
        assert_eq!(count(&actions, action), 1, "{action}: {actions:?}");
    }
}

#[tokio::test]
async fn a_webhook_registered_in_the_form_shows_its_secret_once() {
    let (server, cookie, csrf) = signed_in(true).await;
    let page = text(&server, "/admin/webhooks", &cookie).await;
    assert!(page.contains(r#"id="new-webhook""#));
    assert!(
        page.contains(r#"name="events" value="document.ready""#),
        "{page}"
    );

    let url = "http://127.0.0.1:9/hook";
    let response = post_form(
        &server,
        "/admin/webhooks",
        &cookie,
        &[("csrf", &csrf), ("url", url)],
    )
    .await;
    assert_eq!(
        response.status(),
        StatusCode::BAD_REQUEST,
        "no event chosen"
    );
    let fields = [
        ("csrf", csrf.as_str()),
        ("url", url),
        ("events", "document.ready"),
        ("events", "document.failed"),
    ];
    let response = post_form(&server, "/admin/webhooks", &cookie, &fields).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let created = response.text().await.unwrap();
    let hooks = server.store.list_webhooks().await.unwrap();
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert!(
        created.contains(&format!(r#"value="{}""#, hook.secret)),
        "{created}"
    );

    let page = text(&server, "/admin/webhooks", &cookie).await;
    assert!(
        page.contains(&format!(r#"href="/admin/webhooks/{}">{url}</a>"#, hook.id)),
        "{page}"
    );
    assert!(page.contains("document.ready, document.failed"), "{page}");
    assert!(!page.contains(&hook.secret), "the secret is shown once");
    let detail = text(&server, &format!("/admin/webhooks/{}", hook.id), &cookie).await;
    assert!(detail.contains("Nothing has been delivered yet.") && !detail.contains(&hook.secret));

    let delete = format!("/admin/webhooks/{}/delete", hook.id);
    let response = post_form(&server, &delete, &cookie, &[("csrf", &csrf)]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        server.store.list_webhooks().await.unwrap().len(),
        1,
        "not confirmed"
    );
    let response = post_form(
        &server,
        &delete,
        &cookie,
        &[("csrf", &csrf), ("confirm", "yes")],
    )
    .await;
    assert_eq!(location(&response), "/admin/webhooks");
    assert!(server.store.list_webhooks().await.unwrap().is_empty());

    let actions = audit_actions(&server).await;
    assert_eq!(count(&actions, "webhook.created"), 1, "{actions:?}");
    assert_eq!(count(&actions, "webhook.deleted"), 1, "{actions:?}");
}

#[tokio::test]
async fn the_new_pages_need_a_session_and_their_forms_the_csrf_token() {
    let (server, cookie, csrf) = signed_in(false).await;
    let source = create_source(&server, &cookie, &csrf, "Manuals").await;
    let doc = uuid::Uuid::new_v4();
    let gets = [
        "/admin/sources".to_owned(),
        format!("/admin/sources/{source}"),
        format!("/admin/sources/{source}/statuses"),
        format!("/admin/documents/{doc}"),
        format!("/admin/review/{doc}"),
        format!("/admin/webhooks/{doc}"),
    ];
    for path in &gets {
        let response = get_page(&server, path, "").await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "GET {path}");
        assert_eq!(location(&response), "/admin/login", "GET {path}");
    }
    let posts = [
        "/admin/sources".to_owned(),
        format!("/admin/documents/{doc}/delete"),
        format!("/admin/review/{doc}"),
        "/admin/webhooks".to_owned(),
        format!("/admin/webhooks/{doc}/delete"),
    ];
    for path in &posts {
        let response = post_form(&server, path, "", &[("csrf", &csrf)]).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "POST {path}");
        let response = post_form(&server, path, &cookie, &[("csrf", "wrong")]).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "POST {path}");
    }
    let file = [("a.md", "# A\n\nText.\n")];
    let response = upload(&server, "", Some(&csrf), &source, &file).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = upload(&server, &cookie, None, &source, &file).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = upload(&server, &cookie, Some("wrong"), &source, &file).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let all = statuses(&server, &cookie, &source).await;
    assert!(
        all.as_object().unwrap().is_empty(),
        "nothing was stored: {all}"
    );
    assert_eq!(
        server
            .store
            .list_sources(&quire_core::SourceScope::All)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn the_playground_searches_with_the_scope_of_the_chosen_key() {
    let (server, cookie, csrf) = signed_in(false).await;
    let pumps = create_source(&server, &cookie, &csrf, "Pumps").await;
    let valves = create_source(&server, &cookie, &csrf, "Valves").await;
    let text_of = "Lubricate the bearing housing every month.\n";
    upload_one(
        &server,
        &cookie,
        &csrf,
        &pumps,
        ("pumps.txt", text_of),
        "ready",
    )
    .await;
    let other = "Lubricate the valve stem every month.\n";
    upload_one(
        &server,
        &cookie,
        &csrf,
        &valves,
        ("valves.txt", other),
        "ready",
    )
    .await;
    let scope = quire_core::SourceScope::only(vec![pumps.parse().unwrap()]);
    server
        .key_with(quire_core::Permission::Read, scope, None)
        .await;
    let key = server.store.list_keys().await.unwrap()[0].id;

    let page = text(&server, "/admin/playground", &cookie).await;
    assert!(page.contains(r#"<select id="key" name="key">"#), "{page}");
    assert!(
        page.contains(&format!(r#"<option value="{key}">"#)),
        "{page}"
    );
    let key = key.to_string();
    let fields = [
        ("csrf", csrf.as_str()),
        ("key", &key),
        ("query", "lubricate"),
    ];
    let response = post_form(&server, "/admin/playground", &cookie, &fields).await;
    assert_eq!(response.status(), StatusCode::OK);
    let results = response.text().await.unwrap();
    assert!(results.contains("bearing housing"), "{results}");
    assert!(
        !results.contains("valve stem"),
        "out of the key's scope: {results}"
    );

    // A question is answered with citations, from the key's sources only.
    let fields = [
        ("csrf", csrf.as_str()),
        ("key", &key),
        ("query", "How often is the bearing housing lubricated?"),
        ("action", "ask"),
    ];
    let response = post_form(&server, "/admin/playground", &cookie, &fields).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer = response.text().await.unwrap();
    assert!(answer.contains(r#"id="answer""#), "{answer}");
    assert!(
        answer.contains("Lubricate the bearing housing every month. [1]"),
        "{answer}"
    );
    assert!(
        answer.contains(r#"<ol id="citations">"#) && answer.contains("pumps.txt"),
        "{answer}"
    );
    assert!(
        !answer.contains("valve stem"),
        "out of the key's scope: {answer}"
    );

    let fields = [("csrf", "wrong"), ("key", &key), ("query", "lubricate")];
    let response = post_form(&server, "/admin/playground", &cookie, &fields).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = get_page(&server, "/admin/playground", "").await;
    assert_eq!(location(&response), "/admin/login");
}

/// A document being processed shows its stage and counts on the source's page and in the
/// statuses the page polls.
#[tokio::test]
async fn the_source_page_shows_the_progress_of_a_document_being_processed() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    set_password(&server, PASSWORD).await;
    let (cookie, csrf) = sign_in(&server).await;
    let source = create_source(&server, &cookie, &csrf, "Progress").await;
    let response = upload(
        &server,
        &cookie,
        Some(&csrf),
        &source,
        &[("big.md", "# Big\n")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let now = server.clock_now();
    let job = server
        .store
        .claim_job("w", now, now + chrono::Duration::minutes(10))
        .await
        .unwrap()
        .unwrap();
    server
        .store
        .set_document_progress(
            job.document_id,
            &quire_store::DocumentProgress {
                stage: quire_store::ProcessingStage::Embedding,
                done: Some(120),
                total: Some(400),
                updated_at: now,
            },
        )
        .await
        .unwrap();

    let all = statuses(&server, &cookie, &source).await;
    let entry = &all[job.document_id.to_string()];
    assert_eq!(entry["status"], "processing", "{all}");
    assert_eq!(entry["progress"], "embedding 120/400 chunks", "{all}");
    let page = text(&server, &format!("/admin/sources/{source}"), &cookie).await;
    assert!(
        page.contains("processing (embedding 120/400 chunks)"),
        "{page}"
    );
    // The page polls while the document is processing: admin.js acts on the marked table.
    assert!(page.contains("data-statuses"), "{page}");
    assert!(page.contains(r#"id="documents" data-statuses="#), "{page}");
    assert!(page.contains(" data-poll>"), "{page}");
    let detail = text(
        &server,
        &format!("/admin/documents/{}", job.document_id),
        &cookie,
    )
    .await;
    assert!(
        detail.contains(">processing (embedding 120/400 chunks)</td>"),
        "{detail}"
    );
    assert!(
        detail.contains(" data-poll>processing"),
        "the document's page polls too: {detail}"
    );
}

/// No page carries inline script or style, and the policy allows none: style and script come
/// from the admin's own files, which are served to anyone with their types.
#[tokio::test]
async fn pages_load_style_and_script_only_from_their_own_files() {
    let (server, cookie, csrf) = signed_in(false).await;
    let source = create_source(&server, &cookie, &csrf, "Policies").await;
    let mut pages = vec![("/admin/login".to_owned(), String::new())];
    for path in [
        "/admin".to_owned(),
        "/admin/sources".to_owned(),
        format!("/admin/sources/{source}"),
        "/admin/keys".to_owned(),
        "/admin/review".to_owned(),
        "/admin/webhooks".to_owned(),
        "/admin/playground".to_owned(),
        "/admin/audit".to_owned(),
        "/admin/no-such-page".to_owned(),
    ] {
        pages.push((path, cookie.clone()));
    }
    for (path, cookie) in &pages {
        let response = client()
            .get(server.url(path))
            .header(COOKIE, cookie.as_str())
            .send()
            .await
            .unwrap();
        let policy = response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            policy.contains("script-src 'self'")
                && policy.contains("style-src 'self'")
                && !policy.contains("unsafe-inline"),
            "{path}: {policy}"
        );
        let html = response.text().await.unwrap();
        assert!(!html.contains("<style"), "{path} has inline style");
        assert!(!html.contains(" style="), "{path} has a style attribute");
        assert!(
            !has_inline_handler(&html),
            "{path} has an inline event handler"
        );
        for script in html.split("<script").skip(1) {
            assert!(
                script.starts_with(r#" src="/admin/assets/admin.js""#),
                "{path} has an inline script: <script{}",
                &script[..script.len().min(80)]
            );
        }
        assert!(
            html.contains(r#"<link rel="stylesheet" href="/admin/assets/admin.css">"#),
            "{path} does not link the stylesheet"
        );
    }
    for (name, content_type, needle) in [
        ("admin.css", "text/css", "box-sizing"),
        ("admin.js", "text/javascript", "clipboard"),
    ] {
        let response = client()
            .get(server.url(&format!("/admin/assets/{name}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        let served = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(served.starts_with(content_type), "{name}: {served}");
        assert!(response.text().await.unwrap().contains(needle), "{name}");
    }
    let missing = client()
        .get(server.url("/admin/assets/other.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

/// Whether `html` has an event-handler attribute (` onclick=`, ` onload=` and the like).
fn has_inline_handler(html: &str) -> bool {
    html.match_indices(" on").any(|(at, _)| {
        let rest = &html[at + 3..];
        let name = rest.bytes().take_while(u8::is_ascii_lowercase).count();
        name > 0 && rest[name..].starts_with('=')
    })
}

#[tokio::test]
async fn a_documents_metadata_is_edited_in_its_page_and_bad_json_is_refused() {
    let (server, cookie, csrf) = signed_in(false).await;
    let key = server.key(quire_core::Permission::ReadWrite).await;
    let source = server.create_source(&key, "Edited").await;
    let doc = server
        .upload_ok(&key, &source, "a.md", b"# A\n\nSome text.\n")
        .await;
    let path = format!("/admin/documents/{doc}/metadata");
    let response = post_form(
        &server,
        &path,
        &cookie,
        &[
            ("csrf", &csrf),
            ("metadata", r#"{"team": "ops", "year": 2025}"#),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), format!("/admin/documents/{doc}"));
    let record: Value = crate::helpers::body(
        server
            .get(&key, &format!("/api/v1/sources/{source}/documents/{doc}"))
            .await,
    )
    .await;
    assert_eq!(
        record["metadata"],
        serde_json::json!({"team": "ops", "year": 2025})
    );
    // The whole object replaces the old one.
    let response = post_form(
        &server,
        &path,
        &cookie,
        &[("csrf", &csrf), ("metadata", r#"{"team": "infra"}"#)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let page = text(&server, &format!("/admin/documents/{doc}"), &cookie).await;
    assert!(page.contains("infra") && !page.contains("2025"), "{page}");
    let response = post_form(
        &server,
        &path,
        &cookie,
        &[("csrf", &csrf), ("metadata", r#"{"bad key": 1}"#)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("bad key"));
    let log = server.store.audit_log(10).await.unwrap();
    assert!(
        log.iter()
            .any(|e| e.action == "document.metadata_changed" && e.actor == "admin"),
        "{log:?}"
    );
}

/// A document's page shows its external id and every version; the playground takes a filter,
/// and a malformed one is refused with the reason.
#[tokio::test]
async fn a_documents_versions_are_shown_and_the_playground_filters() {
    let (server, cookie, csrf) = signed_in(false).await;
    let key = server.key(quire_core::Permission::ReadWrite).await;
    let source = server.create_source(&key, "Wiki").await;
    let upload = |text: &'static str| {
        let form = reqwest::multipart::Form::new()
            .text("externalId", "wiki/boilers")
            .part(
                "file",
                reqwest::multipart::Part::bytes(text.as_bytes().to_vec()).file_name("boilers.md"),
            );
        server
            .client
            .post(server.url(&format!("/api/v1/sources/{source}/documents/upload")))
            .bearer_auth(&key)
            .multipart(form)
            .send()
    };
    let first: Value = upload("# Boilers\n\nBleed the radiators in autumn.\n")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let doc = first["id"].as_str().unwrap().to_owned();
    server.wait_for_status(&key, &source, &doc, "ready").await;
    upload("# Boilers\n\nBleed the radiators every spring.\n")
        .await
        .unwrap();
    let api_path = format!("/api/v1/sources/{source}/documents/{doc}");
    crate::helpers::poll(
        std::time::Duration::from_secs(20),
        "version 2 live",
        || async {
            (crate::helpers::body(server.get(&key, &api_path).await).await["version"] == 2)
                .then_some(())
        },
    )
    .await;
    let page = text(&server, &format!("/admin/documents/{doc}"), &cookie).await;
    assert!(page.contains("wiki/boilers"), "{page}");
    assert!(page.contains(r#"<table id="versions">"#), "{page}");
    assert!(
        page.contains("superseded") && page.contains("spring"),
        "{page}"
    );

    server
        .client
        .patch(server.url(&api_path))
        .bearer_auth(&key)
        .json(&serde_json::json!({"metadata": {"team": "facilities"}}))
        .send()
        .await
        .unwrap();
    let key_id = server.store.list_keys().await.unwrap()[0].id.to_string();
    let (server_ref, cookie_ref, csrf_ref, key_ref) = (&server, &cookie, &csrf, &key_id);
    let search = |filter: &'static str| async move {
        let fields = [
            ("csrf", csrf_ref.as_str()),
            ("key", key_ref.as_str()),
            ("query", "radiators"),
            ("filter", filter),
        ];
        post_form(server_ref, "/admin/playground", cookie_ref, &fields).await
    };
    let response = search(r#"{"team": "facilities"}"#).await;
    assert_eq!(response.status(), StatusCode::OK);
    let results = response.text().await.unwrap();
    assert!(
        results.contains("every spring") && !results.contains("autumn"),
        "{results}"
    );
    let none = search(r#"{"team": "kitchen"}"#).await.text().await.unwrap();
    assert!(none.contains(r#"id="no-results""#), "{none}");
    let response = search(r#"{"team": {"$gtt": 1}}"#).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("$gtt"));
}

/// A syncing source's page shows its settings (never its credential) and its last run, and
/// "Sync now" starts another run.
#[tokio::test]
async fn a_syncing_sources_page_shows_its_runs_and_syncs_on_demand() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.md"), "# A\n\nAlpha.\n").unwrap();
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| c.connectors.folder_roots = roots).await;
    set_password(&server, PASSWORD).await;
    let (cookie, csrf) = sign_in(&server).await;
    let admin = server.key(quire_core::Permission::Admin).await;
    let created: Value = crate::helpers::body(
        server
            .post_json(
                &admin,
                "/api/v1/sources",
                &serde_json::json!({"name": "Folder", "type": "folder",
                    "sync": {"path": root.path(), "intervalSeconds": 0}}),
            )
            .await,
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let server_ref = &server;
    let runs = || {
        let (admin, id) = (admin.clone(), id.clone());
        async move {
            let runs: Value = crate::helpers::body(
                server_ref
                    .get(&admin, &format!("/api/v1/sources/{id}/syncs"))
                    .await,
            )
            .await;
            runs.as_array()
                .unwrap()
                .iter()
                .filter(|r| r["status"] != "running")
                .count()
        }
    };
    let ended = |count: usize| {
        crate::helpers::poll(
            Duration::from_secs(30),
            "a sync run's end",
            move || async move { (runs().await >= count).then_some(()) },
        )
    };
    ended(1).await;
    let page = text(&server, &format!("/admin/sources/{id}"), &cookie).await;
    assert!(page.contains(r#"<table id="sync">"#), "{page}");
    assert!(
        page.contains("succeeded") && page.contains("1 added"),
        "{page}"
    );
    assert!(page.contains("on demand"), "{page}");

    let response = post_form(
        &server,
        &format!("/admin/sources/{id}/sync"),
        &cookie,
        &[("csrf", &csrf)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), format!("/admin/sources/{id}"));
    ended(2).await;
    let response = post_form(
        &server,
        &format!("/admin/sources/{id}/sync"),
        &cookie,
        &[("csrf", "wrong")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

/// A syncing source is created through the form (its settings as JSON), bad settings are
/// refused with the reason and the form filled in again, and its settings are changed on its
/// page.
#[tokio::test]
async fn a_syncing_source_is_created_and_its_settings_changed_through_the_forms() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.md"), "# A\n\nAlpha.\n").unwrap();
    std::fs::write(root.path().join("b.txt"), "Beta.").unwrap();
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| c.connectors.folder_roots = roots).await;
    set_password(&server, PASSWORD).await;
    let (cookie, csrf) = sign_in(&server).await;
    let folder = root.path().display().to_string();
    let create = |sync: String| {
        let (server, cookie, csrf) = (&server, cookie.clone(), csrf.clone());
        async move {
            post_form(
                server,
                "/admin/sources",
                &cookie,
                &[
                    ("csrf", csrf.as_str()),
                    ("name", "Handbook"),
                    ("description", ""),
                    ("type", "folder"),
                    ("sync", sync.as_str()),
                ],
            )
            .await
        }
    };

    let refused = create("{not json".into()).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let page = refused.text().await.unwrap();
    assert!(page.contains("not valid JSON"), "{page}");
    assert!(
        page.contains("{not json"),
        "the form keeps what was typed: {page}"
    );
    let outside = create(r#"{"path": "/etc"}"#.into()).await;
    assert_eq!(outside.status(), StatusCode::BAD_REQUEST);
    assert!(
        outside
            .text()
            .await
            .unwrap()
            .contains("outside the allowed roots")
    );

    let sync = serde_json::json!({"path": folder, "intervalSeconds": 0}).to_string();
    let created = create(sync).await;
    assert_eq!(created.status(), StatusCode::SEE_OTHER);
    let id = location(&created)
        .strip_prefix("/admin/sources/")
        .unwrap()
        .to_owned();
    let admin = server.key(quire_core::Permission::Admin).await;
    let first = crate::syncs::finished_run(&server, &admin, &id, 0).await;
    assert_eq!(first["added"], 2, "{first}");
    let page = text(&server, &format!("/admin/sources/{id}"), &cookie).await;
    assert!(page.contains(r#"id="sync-settings""#), "{page}");

    let path = format!("/admin/sources/{id}/sync-settings");
    let bad = post_form(&server, &path, &cookie, &[("csrf", &csrf), ("sync", "[]")]).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("JSON object"));
    let settings =
        serde_json::json!({"path": folder, "exclude": ["*.txt"], "intervalSeconds": 0}).to_string();
    let changed = post_form(
        &server,
        &path,
        &cookie,
        &[("csrf", &csrf), ("sync", &settings)],
    )
    .await;
    assert_eq!(changed.status(), StatusCode::SEE_OTHER);
    let second = crate::syncs::finished_run(&server, &admin, &id, 1).await;
    assert_eq!(second["deleted"], 1, "{second}");
    let page = text(&server, &format!("/admin/sources/{id}"), &cookie).await;
    assert!(page.contains("*.txt"), "{page}");
    let actions = audit_actions(&server).await;
    assert!(
        actions.iter().any(|a| a == "source.sync_changed"),
        "{actions:?}"
    );
}
