//! The admin web interface driven end to end in headless Chromium against a real server:
//! signing in, a scoped key made and revoked through the forms, uploads whose status changes
//! live on the source's page, and a held document reviewed to `ready`. Each page visited is
//! saved as `admin-<page>.png` under the screenshots directory (see `browser`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quire_core::{Permission, Secret, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::browser::{Browser, BrowserError, BrowserResult, Element};
use crate::helpers::{TestServer, body, source_id};

const PASSWORD: &str = "correct horse battery staple";
/// How long a document may take to be parsed, screened and indexed in a test.
const PROCESSING_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a page may take to answer a form.
const PAGE_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);

const CV: &str = "# CV\n\nJane Doe\n\nEmail: jane.doe@example.com\n\nPhone: +44 20 7946 0958\n";
const EMAIL: &str = "jane.doe@example.com";

async fn set_password(server: &TestServer) {
    quire_admin::password::set(
        &server.ledger,
        &quire_app::Actor::Operator,
        Secret::new(PASSWORD.to_owned()),
        "set by the test",
    )
    .await
    .unwrap();
}

/// Signs in through the login form, leaving the browser on the dashboard.
async fn sign_in(browser: &Browser, server: &TestServer, screenshot: bool) {
    browser.goto(&server.url("/admin/login")).await.unwrap();
    let password = browser.find("#password").await.unwrap();
    if screenshot {
        shot(browser, "login").await;
    }
    password.send_keys(PASSWORD).await.unwrap();
    browser
        .find(r#"form[action="/admin/login"] button[type=submit]"#)
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_for_text("h1", "Dashboard", PAGE_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        browser.current_url().await.unwrap(),
        server.url("/admin"),
        "signing in should land on the dashboard"
    );
}

/// Saves `admin-<name>.png`.
async fn shot(browser: &Browser, name: &str) {
    let path = browser
        .screenshot(format!("admin-{name}.png"))
        .await
        .unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// Waits (up to `timeout`) for an element matching `css` to exist.
async fn wait_for<'a>(browser: &'a Browser, css: &str, timeout: Duration) -> Element<'a> {
    let deadline = Instant::now() + timeout;
    loop {
        match browser.find(css).await {
            Ok(element) => return element,
            Err(err)
                if err.webdriver_error() == Some("no such element")
                    && Instant::now() < deadline => {}
            Err(err) => panic!("waiting for {css}: {err}"),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the first element matching `css` reads exactly `text` (trimmed), without
/// reloading the page; on timeout, returns what was last seen.
async fn wait_for_exact(
    browser: &Browser,
    css: &str,
    text: &str,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let read: BrowserResult<String> = async { browser.find(css).await?.text().await }.await;
        let seen = match read {
            Ok(now) if now.trim() == text => return Ok(()),
            Ok(now) => format!("{now:?}"),
            // The row may be redrawn between finding and reading it.
            Err(err) if stale_or_missing(&err) => err.to_string(),
            Err(err) => panic!("waiting for {css} to read {text:?}: {err}"),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "{css} never read {text:?} within {timeout:?}; last seen {seen}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn stale_or_missing(err: &BrowserError) -> bool {
    matches!(
        err.webdriver_error(),
        Some("no such element" | "stale element reference")
    )
}

/// Waits until the browser's address is `url`.
async fn wait_for_url(browser: &Browser, url: &str) {
    let deadline = Instant::now() + PAGE_TIMEOUT;
    loop {
        let now = browser.current_url().await.unwrap();
        if now == url {
            return;
        }
        assert!(Instant::now() < deadline, "still on {now}, expected {url}");
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the page's HTML satisfies `check`.
async fn wait_for_source(browser: &Browser, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PAGE_TIMEOUT;
    loop {
        let html = browser.page_source().await.unwrap();
        if check(&html) {
            return html;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed {what}: {html}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The inner HTML of every `<mark>` in `html`.
fn marks(html: &str) -> Vec<&str> {
    html.split("<mark")
        .skip(1)
        .filter_map(|rest| {
            let inner = &rest[rest.find('>')? + 1..];
            Some(&inner[..inner.find("</mark>")?])
        })
        .collect()
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect()
}

/// Writes `contents` to `dir/name` and returns its absolute path.
fn write_file(dir: &TempDir, name: &str, contents: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    path.canonicalize().unwrap()
}

/// Uploads the file at `path` with the source page's form (the browser is on that page) and
/// returns the id of the row that appears for it.
async fn upload_in_browser(browser: &Browser, path: &Path) -> String {
    let input = browser
        .find("form#upload input#files[type=file]")
        .await
        .unwrap();
    assert!(
        input.attr("multiple").await.unwrap().is_some(),
        "the file input should take several files"
    );
    input.send_keys(path.to_str().unwrap()).await.unwrap();
    browser
        .find("button#upload-button")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let row = wait_for(browser, "tr[data-document-id]", PAGE_TIMEOUT).await;
    let id = row.attr("data-document-id").await.unwrap().unwrap();
    assert!(!id.is_empty());
    // Usually still queued or processing here, so what follows watches the page change.
    if let Ok(cell) = browser
        .find(&format!(r#"tr[data-document-id="{id}"] td.status"#))
        .await
    {
        eprintln!("first status shown: {:?}", cell.text().await);
    }
    id
}

/// Waits for the source page's status cell of document `id` to read `status`, without
/// reloading; a timeout names the status the API reports, to tell a stale page from a slow
/// pipeline.
async fn wait_for_row_status(
    browser: &Browser,
    server: &TestServer,
    admin: &str,
    (source, id): (&str, &str),
    status: &str,
) {
    let cell = format!(r#"tr[data-document-id="{id}"] td.status"#);
    if let Err(seen) = wait_for_exact(browser, &cell, status, PROCESSING_TIMEOUT).await {
        let doc = body(
            server
                .get(admin, &format!("/api/v1/sources/{source}/documents/{id}"))
                .await,
        )
        .await;
        panic!("{seen}; the API says {}", doc["status"]);
    }
}

#[tokio::test]
async fn an_administrator_signs_in_and_manages_a_scoped_key() {
    let started = Instant::now();
    let server = TestServer::start_with(|c| c.webhooks.allow_private_targets = true).await;
    set_password(&server).await;
    let admin = server.key(Permission::Admin).await;
    let pumps = server.create_source(&admin, "Pumps").await;
    let payroll = server.create_source(&admin, "Payroll").await;
    let in_pumps = server
        .upload_ok(&admin, &pumps, "pumps.md", b"shared term alpha")
        .await;
    let in_payroll = server
        .upload_ok(&admin, &payroll, "payroll.md", b"shared term beta")
        .await;
    server
        .wait_for_status(&admin, &pumps, &in_pumps, "ready")
        .await;
    server
        .wait_for_status(&admin, &payroll, &in_payroll, "ready")
        .await;
    // Something for the webhooks page to list; the event never fires here.
    let hook = server
        .post_json(
            &admin,
            "/api/v1/webhooks",
            &json!({"url": "http://127.0.0.1:9/quire-hook", "events": ["document.failed"]}),
        )
        .await;
    assert_eq!(hook.status(), StatusCode::CREATED);

    let browser = Browser::start().await.unwrap();
    sign_in(&browser, &server, true).await;
    shot(&browser, "dashboard").await;

    // Create a read key limited to Pumps.
    browser.goto(&server.url("/admin/keys")).await.unwrap();
    browser
        .wait_for_text("h1", "API keys", PAGE_TIMEOUT)
        .await
        .unwrap();
    browser
        .find("#name")
        .await
        .unwrap()
        .send_keys("agent for pumps")
        .await
        .unwrap();
    browser
        .find(r#"#permission option[value="read"]"#)
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .find("#scope-chosen")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .find(&format!(r#"input[name=source][value="{pumps}"]"#))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .find(r#"form[action="/admin/keys"] button[type=submit]"#)
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_for_text("h1", "Key created", PAGE_TIMEOUT)
        .await
        .unwrap();
    let secret = browser
        .find("#secret")
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .expect("the new key's secret is shown");
    assert!(secret.starts_with("qk_"), "{secret}");
    shot(&browser, "keys-secret").await;

    let keys = server.store.list_keys().await.unwrap();
    let key = keys
        .iter()
        .find(|k| k.name == "agent for pumps")
        .expect("the key is stored");
    assert_eq!(key.permission, Permission::Read);
    assert_eq!(key.scope, SourceScope::only([source_id(&pumps)]));

    // The key sees Pumps and nothing else.
    let sources = server.get(&secret, "/api/v1/sources").await;
    assert_eq!(sources.status(), StatusCode::OK);
    assert_eq!(ids(&body(sources).await), vec![pumps.as_str()]);
    let found = server
        .search(&secret, json!({"query": "shared term"}))
        .await;
    assert_eq!(found.status(), StatusCode::OK);
    let found = body(found).await;
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{found}");
    assert_eq!(results[0]["dataSource"]["id"], pumps.as_str());
    // A read key cannot write.
    let write = server
        .post_json(&secret, "/api/v1/sources", &json!({"name": "Mine"}))
        .await;
    assert_eq!(write.status(), StatusCode::FORBIDDEN);

    // Revoke it, through the confirmation step.
    browser.goto(&server.url("/admin/keys")).await.unwrap();
    browser
        .wait_for_text("tbody", "agent for pumps", PAGE_TIMEOUT)
        .await
        .unwrap();
    assert!(
        !browser.page_source().await.unwrap().contains(&secret),
        "the secret is shown only once"
    );
    shot(&browser, "keys").await;
    browser
        .find(&format!(r#"a[href="/admin/keys/{}/revoke"]"#, key.id))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_for_text("h1", "Revoke a key", PAGE_TIMEOUT)
        .await
        .unwrap();
    shot(&browser, "revoke-confirm").await;
    // Looking at the confirmation changes nothing.
    assert_eq!(
        server.get(&secret, "/api/v1/sources").await.status(),
        StatusCode::OK
    );
    browser
        .find(&format!(
            r#"form[action="/admin/keys/{}/revoke"] button[type=submit]"#,
            key.id
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_url(&browser, &server.url("/admin/keys")).await;
    browser
        .wait_for_text("tbody", "Revoked", PAGE_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        server.get(&secret, "/api/v1/sources").await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        server
            .search(&secret, json!({"query": "shared term"}))
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );

    browser.goto(&server.url("/admin/audit")).await.unwrap();
    let audit = browser
        .wait_for_text("main", "key.revoked", PAGE_TIMEOUT)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for action in ["admin.signed_in", "key.created"] {
        assert!(audit.contains(action), "{action} missing from {audit}");
    }
    shot(&browser, "audit").await;

    browser.goto(&server.url("/admin/webhooks")).await.unwrap();
    browser
        .wait_for_text("main", "http://127.0.0.1:9/quire-hook", PAGE_TIMEOUT)
        .await
        .unwrap();
    shot(&browser, "webhooks").await;

    browser.quit().await.unwrap();
    eprintln!("scoped key test took {:?}", started.elapsed());
}

#[tokio::test]
async fn an_upload_becomes_ready_before_the_administrators_eyes() {
    let started = Instant::now();
    let server = TestServer::start().await;
    set_password(&server).await;
    let admin = server.key(Permission::Admin).await;
    let files = tempfile::tempdir().unwrap();
    let manual = write_file(
        &files,
        "pump-manual.md",
        "# Pump manual\n\nBleed the centrifugal pump before starting it.\n",
    );

    let browser = Browser::start().await.unwrap();
    sign_in(&browser, &server, false).await;

    // Create the source with the page's form.
    browser.goto(&server.url("/admin/sources")).await.unwrap();
    browser
        .find("form#new-source input[name=name]")
        .await
        .unwrap()
        .send_keys("Handbooks")
        .await
        .unwrap();
    browser
        .find("button#create-source")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let source = wait_for_source_created(&server, &admin, "Handbooks").await;
    let source = source.as_str();
    browser.goto(&server.url("/admin/sources")).await.unwrap();
    browser
        .wait_for_text("a.source-link", "Handbooks", PAGE_TIMEOUT)
        .await
        .unwrap();
    shot(&browser, "sources").await;
    browser
        .find("a.source-link")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let source_url = server.url(&format!("/admin/sources/{source}"));
    wait_for_url(&browser, &source_url).await;

    // Upload, then watch the row without reloading the page.
    let id = upload_in_browser(&browser, &manual).await;
    let page_after_upload = browser.current_url().await.unwrap();
    wait_for_row_status(&browser, &server, &admin, (source, &id), "ready").await;
    assert_eq!(
        browser.current_url().await.unwrap(),
        page_after_upload,
        "the status changed in place"
    );
    // The chunk count follows the status in place (it read 0 while the document was queued).
    let chunks = browser
        .find(&format!(r#"tr[data-document-id="{id}"] td.chunks"#))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_ne!(chunks.trim(), "0", "the chunk count was not updated");
    browser
        .wait_for_text(
            &format!(r#"tr[data-document-id="{id}"]"#),
            "pump-manual.md",
            PAGE_TIMEOUT,
        )
        .await
        .unwrap();
    shot(&browser, "source").await;

    let doc = body(
        server
            .get(&admin, &format!("/api/v1/sources/{source}/documents/{id}"))
            .await,
    )
    .await;
    assert_eq!(doc["status"], "ready", "{doc}");
    assert_eq!(doc["name"], "pump-manual.md", "{doc}");

    browser
        .goto(&server.url(&format!("/admin/documents/{id}")))
        .await
        .unwrap();
    browser
        .wait_for_text("main", "pump-manual.md", PAGE_TIMEOUT)
        .await
        .unwrap();
    browser
        .wait_for_text("main", "ready", PAGE_TIMEOUT)
        .await
        .unwrap();
    shot(&browser, "document").await;

    browser.quit().await.unwrap();
    eprintln!("live upload test took {:?}", started.elapsed());
}

/// Waits for the source `name` to exist (created through the page's form) and returns its id.
async fn wait_for_source_created(server: &TestServer, admin: &str, name: &str) -> String {
    let deadline = Instant::now() + PAGE_TIMEOUT;
    loop {
        let list = body(server.get(admin, "/api/v1/sources").await).await;
        if let Some(source) = list.as_array().unwrap().iter().find(|s| s["name"] == name) {
            return source["id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the form never created {name}: {list}"
        );
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::test]
async fn a_document_with_personal_data_is_reviewed_to_ready() {
    let started = Instant::now();
    let server = TestServer::start().await;
    set_password(&server).await;
    let admin = server.key(Permission::Admin).await;
    let source = server.create_source(&admin, "People").await;
    let files = tempfile::tempdir().unwrap();
    let cv = write_file(&files, "cv.md", CV);

    let browser = Browser::start().await.unwrap();
    sign_in(&browser, &server, false).await;
    let source_url = server.url(&format!("/admin/sources/{source}"));
    browser.goto(&source_url).await.unwrap();
    let id = upload_in_browser(&browser, &cv).await;
    wait_for_row_status(&browser, &server, &admin, (&source, &id), "pending_review").await;

    browser.goto(&server.url("/admin/review")).await.unwrap();
    browser
        .wait_for_text("a.review-link", "cv.md", PAGE_TIMEOUT)
        .await
        .unwrap();
    shot(&browser, "review").await;
    browser
        .find("a.review-link")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_url(&browser, &server.url(&format!("/admin/review/{id}"))).await;
    let html = wait_for_source(&browser, "the e-mail address marked", |html| {
        marks(html).iter().any(|m| m.contains(EMAIL))
    })
    .await;
    assert!(
        html.contains("form") && html.contains(r#"id="decide""#),
        "{html}"
    );
    shot(&browser, "review-detail").await;

    browser
        .find(r#"form#decide button[name=decision][value=approve]"#)
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The decision is taken once the document leaves the queue and is indexed.
    server.wait_for_status(&admin, &source, &id, "ready").await;
    browser.goto(&source_url).await.unwrap();
    wait_for_row_status(&browser, &server, &admin, (&source, &id), "ready").await;
    let waiting = body(server.get(&admin, "/api/v1/reviews").await).await;
    assert_eq!(waiting.as_array().unwrap().len(), 0, "{waiting}");

    browser.quit().await.unwrap();
    eprintln!("review test took {:?}", started.elapsed());
}
