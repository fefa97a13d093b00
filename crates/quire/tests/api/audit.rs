//! One door: the same action leaves the same audit entry whichever adapter did it (the CLI,
//! the REST API or the admin interface); only the actor differs (`operator`, `key <name>
//! (<id>)`, `admin`).

use quire_app::Actor;
use quire_app::keys::KeySpec;
use quire_app::records::AuditEntry;
use quire_core::{ApiKeyRecord, Permission, SourceScope};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::admin::{PASSWORD, client, encode, set_password, sign_in};
use crate::helpers::{TestServer, body};

/// Runs the `quire` binary on the server's data directory, as an operator would beside the
/// running server; returns whether it succeeded, and its output.
async fn quire(server: &TestServer, args: &[&str]) -> (bool, String) {
    let data_dir = server.data_dir.path();
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("QUIRE_DATA_DIR")
        .env_remove("QUIRE_CONFIG")
        .envs(crate::helpers::store_env(data_dir))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{stdout}{stderr}"))
}

/// Posts an admin form (a `303`/`201` answer is not followed).
async fn post_form(
    server: &TestServer,
    path: &str,
    cookie: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client()
        .post(server.url(path))
        .header(COOKIE, cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(fields))
        .send()
        .await
        .unwrap()
}

/// An admin key made as the operator, with its record (the REST actor names its id).
async fn admin_key(server: &TestServer, name: &str) -> (ApiKeyRecord, String) {
    let spec = KeySpec {
        name: name.to_owned(),
        permission: Permission::Admin,
        scope: SourceScope::All,
        rate_limit: None,
    };
    let (record, secret) = quire_app::keys::create(&server.ledger, &Actor::Operator, spec)
        .await
        .unwrap();
    (record, secret.expose().clone())
}

/// How the audit log names the actor of a request made with `key`.
fn key_actor(key: &ApiKeyRecord) -> String {
    format!("key {} ({})", key.name, key.id)
}

/// The entries with `action`, as the store holds them.
async fn entries(server: &TestServer, action: &str) -> Vec<AuditEntry> {
    server
        .store
        .audit_log(1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == action)
        .collect()
}

/// The one entry of `action` by `actor` whose detail names `id`.
async fn entry(server: &TestServer, action: &str, actor: &str, id: &str) -> AuditEntry {
    let all = entries(server, action).await;
    let found: Vec<&AuditEntry> = all
        .iter()
        .filter(|e| e.actor == actor && e.detail.contains(id))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {action} by {actor:?} naming {id} expected in {all:#?}"
    );
    found[0].clone()
}

/// Session sign-in on a fresh server (the password is set as the operator).
async fn signed_in(server: &TestServer) -> (String, String) {
    set_password(server, PASSWORD).await;
    sign_in(server).await
}

#[tokio::test]
async fn a_key_made_with_the_cli_or_the_admin_form_leaves_the_same_entry() {
    let server = TestServer::start().await;
    let (cookie, csrf) = signed_in(&server).await;

    // The operator, with the real binary beside the running server.
    let (ok, out) = quire(
        &server,
        &[
            "keys",
            "create",
            "--name",
            "from the cli",
            "--permission",
            "admin",
            "--json",
        ],
    )
    .await;
    assert!(ok, "{out}");
    let printed: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let cli_id = printed["id"].as_str().unwrap().to_owned();

    // The administrator, with the key form.
    let response = post_form(
        &server,
        "/admin/keys",
        &cookie,
        &[
            ("csrf", &csrf),
            ("name", "from the form"),
            ("permission", "admin"),
            ("scope", "all"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let keys = server.store.list_keys().await.unwrap();
    let form = keys.iter().find(|k| k.name == "from the form").unwrap();
    let cli = keys.iter().find(|k| k.id.to_string() == cli_id).unwrap();

    let by_cli = entry(&server, "key.created", "operator", &cli_id).await;
    let by_form = entry(&server, "key.created", "admin", &form.id.to_string()).await;
    // The same detail, field for field: name (id), permission, scope.
    for (entry, key) in [(&by_cli, cli), (&by_form, form)] {
        assert_eq!(
            entry.detail,
            format!("{} ({}), admin, all sources", key.name, key.id),
            "{entry:?}"
        );
    }
    assert_eq!(entries(&server, "key.created").await.len(), 2);
}

/// The test CV, made distinct by `n` (the same bytes twice in one source would be one
/// document).
fn cv(n: usize) -> String {
    format!("# CV {n}\n\nJane Doe\n\nEmail: jane.doe@example.com\n\nPhone: +44 20 7946 0958\n")
}

#[tokio::test]
async fn a_review_decided_over_rest_in_the_admin_interface_or_with_the_cli_leaves_the_same_entry() {
    let server = TestServer::start().await;
    let (key, secret) = admin_key(&server, "reviewer").await;
    let source = server.create_source(&secret, "People").await;
    let mut held = Vec::new();
    for n in 0..3 {
        let id = server
            .upload_ok(&secret, &source, &format!("cv-{n}.md"), cv(n).as_bytes())
            .await;
        server
            .wait_for_status(&secret, &source, &id, "pending_review")
            .await;
        held.push(id);
    }
    let (over_rest, in_admin, with_cli) = (&held[0], &held[1], &held[2]);

    let response = server
        .post_json(
            &secret,
            &format!("/api/v1/reviews/{over_rest}/approve"),
            &json!({}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);

    let (cookie, csrf) = signed_in(&server).await;
    let response = post_form(
        &server,
        &format!("/admin/review/{in_admin}"),
        &cookie,
        &[("csrf", &csrf), ("decision", "approve")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/admin/review?done=approved");

    let (ok, out) = quire(&server, &["review", "approve", with_cli]).await;
    assert!(ok, "{out}");

    let entries_by = [
        entry(&server, "review.approved", &key_actor(&key), over_rest).await,
        entry(&server, "review.approved", "admin", in_admin).await,
        entry(&server, "review.approved", "operator", with_cli).await,
    ];
    // The same detail: the document's name and id.
    let names = ["cv-0.md", "cv-1.md", "cv-2.md"];
    for ((entry, id), name) in entries_by.iter().zip(&held).zip(names) {
        assert_eq!(entry.detail, format!("{name} ({id})"), "{entry:?}");
    }
    assert_eq!(entries(&server, "review.approved").await.len(), 3);

    // Each decision took effect: the workers index all three. The CLI dated its decision by
    // the wall clock; bring the test server's clock there too.
    server
        .clock
        .set(chrono::Utc::now() + chrono::Duration::seconds(1));
    for id in &held {
        let doc = server.wait_for_status(&secret, &source, id, "ready").await;
        assert_eq!(doc["status"], "ready", "{doc}");
    }
}

#[tokio::test]
async fn a_webhook_registered_over_rest_or_in_the_admin_form_leaves_the_same_entry() {
    let server = TestServer::start_with(|c| c.webhooks.allow_private_targets = true).await;
    let (key, secret) = admin_key(&server, "integrator").await;
    let url = "http://127.0.0.1:9/quire-hook";

    let response = server
        .post_json(
            &secret,
            "/api/v1/webhooks",
            &json!({"url": url, "events": ["document.ready"]}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let over_rest = body(response).await["id"].as_str().unwrap().to_owned();

    let (cookie, csrf) = signed_in(&server).await;
    let response = post_form(
        &server,
        "/admin/webhooks",
        &cookie,
        &[("csrf", &csrf), ("url", url), ("events", "document.ready")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let hooks = server.store.list_webhooks().await.unwrap();
    assert_eq!(hooks.len(), 2);
    let in_admin = hooks
        .iter()
        .find(|h| h.id.to_string() != over_rest)
        .unwrap()
        .id
        .to_string();

    let entries_by = [
        (
            entry(&server, "webhook.created", &key_actor(&key), &over_rest).await,
            &over_rest,
        ),
        (
            entry(&server, "webhook.created", "admin", &in_admin).await,
            &in_admin,
        ),
    ];
    // The same detail: the target and the webhook's id.
    for (entry, id) in &entries_by {
        assert_eq!(entry.detail, format!("{url} ({id})"), "{entry:?}");
    }
    assert_eq!(entries(&server, "webhook.created").await.len(), 2);
}
