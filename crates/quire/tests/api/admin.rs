//! The admin web interface under /admin: sessions, the sign-in throttle, CSRF, API keys made
//! and revoked through the forms, and `quire admin set-password`.

use std::process::Stdio;

use chrono::Duration;
use quire_app::Actor;
use quire_core::{Permission, Secret};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Response, StatusCode};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::helpers::{TestServer, assert_error};

mod pages;

/// The administrator's password in these tests.
pub(crate) const PASSWORD: &str = "correct horse battery staple";

/// A client that shows redirects instead of following them.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

pub(crate) async fn set_password(server: &TestServer, password: &str) {
    quire_admin::password::set(
        &server.ledger,
        &Actor::Operator,
        Secret::new(password.to_owned()),
        "set by the test",
    )
    .await
    .unwrap();
}

/// `application/x-www-form-urlencoded`, every byte but letters and digits escaped.
pub(crate) fn encode(fields: &[(&str, &str)]) -> String {
    let escape = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The value of cookie `name` set by the response, with the whole `Set-Cookie` line.
fn set_cookie(response: &Response, name: &str) -> Option<(String, String)> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|line| line.starts_with(&format!("{name}=")))
        .map(|line| {
            let value = line[name.len() + 1..].split(';').next().unwrap().to_owned();
            (value, line)
        })
}

/// The value of the first `name="field"` input in an HTML page.
fn field_value(html: &str, field: &str) -> String {
    let marker = format!(r#"name="{field}" value=""#);
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {field} field in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

async fn post_form(
    server: &TestServer,
    path: &str,
    cookie: &str,
    fields: &[(&str, &str)],
) -> Response {
    client()
        .post(server.url(path))
        .header(COOKIE, cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(fields))
        .send()
        .await
        .unwrap()
}

async fn get_page(server: &TestServer, path: &str, cookie: &str) -> Response {
    client()
        .get(server.url(path))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap()
}

/// The sign-in form's cookie header and token.
async fn login_form(server: &TestServer) -> (String, String) {
    let response = client()
        .get(server.url("/admin/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (token, line) = set_cookie(&response, "quire_admin_login").expect("no login cookie");
    assert!(
        line.contains("HttpOnly") && line.contains("SameSite=Strict"),
        "{line}"
    );
    let html = response.text().await.unwrap();
    assert!(html.contains(r#"<label for="password">"#), "{html}");
    assert_eq!(field_value(&html, "csrf"), token);
    (format!("quire_admin_login={token}"), token)
}

async fn try_sign_in(server: &TestServer, password: &str) -> Response {
    let (cookie, token) = login_form(server).await;
    post_form(
        server,
        "/admin/login",
        &cookie,
        &[("csrf", &token), ("password", password)],
    )
    .await
}

/// Signs in and returns the session's cookie header and CSRF token.
pub(crate) async fn sign_in(server: &TestServer) -> (String, String) {
    let response = try_sign_in(server, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/admin");
    let (token, _) = set_cookie(&response, "quire_admin").expect("no session cookie");
    let cookie = format!("quire_admin={token}");
    let page = get_page(server, "/admin", &cookie).await;
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("<h1>Dashboard</h1>"), "{html}");
    (cookie.clone(), field_value(&html, "csrf"))
}

#[tokio::test]
async fn every_admin_route_needs_a_session() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    let key_path = format!("/admin/keys/{}/revoke", uuid::Uuid::new_v4());
    for cookie in ["", "quire_admin=0123456789abcdef"] {
        for path in [
            "/admin",
            "/admin/keys",
            "/admin/review",
            "/admin/webhooks",
            "/admin/audit",
            key_path.as_str(),
            "/admin/no-such-page",
        ] {
            let response = get_page(&server, path, cookie).await;
            assert_eq!(response.status(), StatusCode::SEE_OTHER, "GET {path}");
            assert_eq!(response.headers()[LOCATION], "/admin/login", "GET {path}");
        }
        for path in ["/admin/keys", "/admin/logout", key_path.as_str()] {
            let response = post_form(&server, path, cookie, &[("csrf", "x")]).await;
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "POST {path}");
            assert!(response.text().await.unwrap().contains("Not signed in"));
        }
    }
    let response = get_page(&server, "/admin/", "").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/admin");
    // The API's own fallbacks still answer everything outside /admin (under /api/v1, a key
    // is asked for first).
    let response = server
        .client
        .get(server.url("/api/v1/nothing"))
        .send()
        .await
        .unwrap();
    assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let response = server
        .client
        .get(server.url("/administrator"))
        .send()
        .await
        .unwrap();
    assert_error(response, StatusCode::NOT_FOUND, "not_found").await;
}

#[tokio::test]
async fn sign_in_sets_a_strict_cookie_and_sign_out_ends_the_session() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    let response = try_sign_in(&server, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let (token, line) = set_cookie(&response, "quire_admin").unwrap();
    assert_eq!(token.len(), 64);
    for flag in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/admin",
        "Max-Age=43200",
    ] {
        assert!(line.contains(flag), "{flag} missing: {line}");
    }
    assert!(!line.contains("Secure"), "plain HTTP: {line}");

    // Behind a TLS-terminating proxy the cookies are Secure.
    let (cookie, csrf) = login_form(&server).await;
    let response = client()
        .post(server.url("/admin/login"))
        .header(COOKIE, cookie)
        .header("x-forwarded-proto", "https")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("csrf", &csrf), ("password", PASSWORD)]))
        .send()
        .await
        .unwrap();
    let (_, line) = set_cookie(&response, "quire_admin").unwrap();
    assert!(line.contains("; Secure"), "{line}");

    // Sign out: the session is gone.
    let (session, csrf) = sign_in(&server).await;
    let response = post_form(&server, "/admin/logout", &session, &[("csrf", &csrf)]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let (cleared, _) = set_cookie(&response, "quire_admin").unwrap();
    assert!(cleared.is_empty());
    let response = get_page(&server, "/admin", &session).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    // Sessions end after 12 hours.
    let (session, _) = sign_in(&server).await;
    server.clock.advance(Duration::hours(12));
    let response = get_page(&server, "/admin/keys", &session).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    let log = server.store.audit_log(10).await.unwrap();
    assert!(log.iter().any(|e| e.action == "admin.signed_in"));
    assert!(log.iter().any(|e| e.action == "admin.signed_out"));
}

#[tokio::test]
async fn parallel_wrong_passwords_get_no_more_than_five_tries_and_a_new_password_lets_in() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    let attempts = (0..20).map(|_| try_sign_in(&server, "not the password"));
    let statuses: Vec<StatusCode> = futures_util::future::join_all(attempts)
        .await
        .iter()
        .map(Response::status)
        .collect();
    let verified = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    assert!(
        verified <= 5,
        "{verified} passwords were checked: {statuses:?}"
    );
    assert!(
        statuses
            .iter()
            .all(|s| [StatusCode::UNAUTHORIZED, StatusCode::TOO_MANY_REQUESTS].contains(s)),
        "{statuses:?}"
    );
    let response = try_sign_in(&server, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    // Setting a new password (as `quire admin set-password` does, also while the server runs)
    // is the way back in at once.
    quire_admin::password::set(
        &server.ledger,
        &Actor::Operator,
        Secret::new("a brand new admin password".to_owned()),
        "set by the test",
    )
    .await
    .unwrap();
    let response = try_sign_in(&server, "a brand new admin password").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn wrong_passwords_are_refused_and_the_sixth_attempt_is_throttled() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    for attempt in 1..=5 {
        let response = try_sign_in(&server, "not the password").await;
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "attempt {attempt}"
        );
        assert!(set_cookie(&response, "quire_admin").is_none());
        assert!(response.text().await.unwrap().contains("Wrong password."));
    }
    // Even the right password waits until the window has passed.
    let response = try_sign_in(&server, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(response.headers().contains_key("retry-after"));
    assert!(response.text().await.unwrap().contains("Too many attempts"));
    server.clock.advance(Duration::minutes(14));
    let response = try_sign_in(&server, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    server.clock.advance(Duration::minutes(1));
    sign_in(&server).await;
    let failed = server.store.audit_log(20).await.unwrap();
    assert_eq!(
        failed
            .iter()
            .filter(|e| e.action == "admin.sign_in_failed")
            .count(),
        5
    );
}

#[tokio::test]
async fn posts_without_the_right_csrf_token_are_refused() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    let (session, csrf) = sign_in(&server).await;
    let fields = [("name", "agent"), ("permission", "read"), ("scope", "all")];
    let response = post_form(&server, "/admin/keys", &session, &fields).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let mut wrong = fields.to_vec();
    wrong.push(("csrf", "0000"));
    let response = post_form(&server, "/admin/keys", &session, &wrong).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = post_form(&server, "/admin/logout", &session, &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(server.store_keys().await.is_empty());
    // The session survived the refused sign-out.
    assert_eq!(
        get_page(&server, "/admin", &session).await.status(),
        StatusCode::OK
    );

    // Sign-in needs the form's cookie and token to agree.
    let (_, token) = login_form(&server).await;
    let response = post_form(
        &server,
        "/admin/login",
        "",
        &[("csrf", &token), ("password", PASSWORD)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let (cookie, _) = login_form(&server).await;
    let response = post_form(
        &server,
        "/admin/login",
        &cookie,
        &[("csrf", "other"), ("password", PASSWORD)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    // Agreeing is not enough: the token must be one this server signed, under the current
    // password, within the hour.
    let forged = "0123456789abcdef.99999999999.0123456789abcdef";
    let response = post_form(
        &server,
        "/admin/login",
        &format!("quire_admin_login={forged}"),
        &[("csrf", forged), ("password", PASSWORD)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let (cookie, token) = login_form(&server).await;
    server.clock.advance(Duration::minutes(61));
    let response = post_form(
        &server,
        "/admin/login",
        &cookie,
        &[("csrf", &token), ("password", PASSWORD)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN, "expired");
    let (cookie, token) = login_form(&server).await;
    set_password(&server, "a new password for the admin").await;
    let response = post_form(
        &server,
        "/admin/login",
        &cookie,
        &[
            ("csrf", &token),
            ("password", "a new password for the admin"),
        ],
    )
    .await;
    assert_eq!(
        response.status(),
        StatusCode::FORBIDDEN,
        "issued before the new password"
    );
    let _ = csrf;
}

#[tokio::test]
async fn a_key_created_in_the_form_works_until_it_is_revoked() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    let (session, csrf) = sign_in(&server).await;

    // An invalid form is shown again with the reason.
    let response = post_form(
        &server,
        "/admin/keys",
        &session,
        &[
            ("csrf", &csrf),
            ("name", "  "),
            ("permission", "read"),
            ("scope", "all"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("Give the key a name.")
    );

    let response = post_form(
        &server,
        "/admin/keys",
        &session,
        &[
            ("csrf", &csrf),
            ("name", "agent <one>"),
            ("permission", "read"),
            ("scope", "all"),
            ("rate_limit", "30"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let html = response.text().await.unwrap();
    assert!(html.contains("agent &lt;one&gt;"), "not escaped: {html}");
    // The copy button, shown by admin.js when the browser has a clipboard.
    assert!(html.contains(r#"<button type="button" id="copy" hidden>"#));
    let start = html.find("value=\"qk_").unwrap() + "value=\"".len();
    let secret = html[start..].split('"').next().unwrap().to_owned();
    assert_eq!(
        server.get(&secret, "/api/v1/sources").await.status(),
        StatusCode::OK
    );

    let keys = server.store.list_keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    let key = &keys[0];
    assert_eq!(
        (key.permission, key.rate_limit),
        (Permission::Read, Some(30))
    );
    // The secret is never shown again.
    let list = get_page(&server, "/admin/keys", &session)
        .await
        .text()
        .await
        .unwrap();
    assert!(list.contains("agent &lt;one&gt;") && !list.contains(&secret));

    let confirm = format!("/admin/keys/{}/revoke", key.id);
    let page = get_page(&server, &confirm, &session).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("Revoke the key"));
    // Looking at the confirmation changes nothing.
    assert_eq!(
        server.get(&secret, "/api/v1/sources").await.status(),
        StatusCode::OK
    );
    let response = post_form(&server, &confirm, &session, &[("csrf", &csrf)]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/admin/keys");
    assert_eq!(
        server.get(&secret, "/api/v1/sources").await.status(),
        StatusCode::UNAUTHORIZED
    );

    let audit = get_page(&server, "/admin/audit", &session)
        .await
        .text()
        .await
        .unwrap();
    for action in [
        "key.created",
        "key.revoked",
        "admin.signed_in",
        "admin.password_set",
    ] {
        assert!(
            audit.contains(action),
            "{action} not in the audit log: {audit}"
        );
    }
}

#[tokio::test]
async fn keys_can_be_limited_to_chosen_sources() {
    let server = TestServer::start().await;
    set_password(&server, PASSWORD).await;
    let admin = server.key(Permission::Admin).await;
    let first = server.create_source(&admin, "first").await;
    let second = server.create_source(&admin, "second").await;
    let (session, csrf) = sign_in(&server).await;
    let response = post_form(
        &server,
        "/admin/keys",
        &session,
        &[
            ("csrf", &csrf),
            ("name", "scoped"),
            ("permission", "read"),
            ("scope", "chosen"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let response = post_form(
        &server,
        "/admin/keys",
        &session,
        &[
            ("csrf", &csrf),
            ("name", "scoped"),
            ("permission", "read"),
            ("scope", "chosen"),
            ("source", &first),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let html = response.text().await.unwrap();
    let start = html.find("value=\"qk_").unwrap() + "value=\"".len();
    let secret = html[start..].split('"').next().unwrap().to_owned();
    let path = |id: &str| format!("/api/v1/sources/{id}");
    assert_eq!(
        server.get(&secret, &path(&first)).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        server.get(&secret, &path(&second)).await.status(),
        StatusCode::NOT_FOUND
    );
}

async fn run_set_password(server: &TestServer, stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["admin", "set-password", "--data-dir"])
        .arg(server.data_dir.path())
        .env_remove("QUIRE_DATA_DIR")
        .envs(crate::helpers::store_env(server.data_dir.path()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .await
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test]
async fn set_password_reads_standard_input_and_refuses_short_passwords() {
    let server = TestServer::start().await;
    let response = client()
        .get(server.url("/admin/login"))
        .send()
        .await
        .unwrap();
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("quire admin set-password")
    );

    let (ok, _, stderr) = run_set_password(&server, "short\n").await;
    assert!(!ok);
    assert!(stderr.contains("at least 10 characters"), "{stderr}");
    assert!(server.store.admin_password_hash().await.unwrap().is_none());

    let (ok, stdout, stderr) = run_set_password(&server, &format!("{PASSWORD}\n")).await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("admin password set"), "{stdout}");
    let hash = server.store.admin_password_hash().await.unwrap().unwrap();
    assert!(hash.starts_with("$argon2id$") && !hash.contains(PASSWORD));
    let (session, _) = sign_in(&server).await;

    // A new password signs every session out; the old one stops working.
    let (ok, _, stderr) = run_set_password(&server, "another long password\r\n").await;
    assert!(ok, "{stderr}");
    assert_eq!(
        get_page(&server, "/admin", &session).await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        try_sign_in(&server, PASSWORD).await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        try_sign_in(&server, "another long password").await.status(),
        StatusCode::SEE_OTHER
    );
}

/// Starts `quire serve` with `QUIRE_ADMIN_PASSWORD` on `dir`; returns whether it got to
/// listening, and its log up to then (or to its exit).
async fn serve_with_env_password(dir: &std::path::Path, password: &str) -> (bool, String) {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let mut child = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env_remove("QUIRE_DATA_DIR")
        .envs(crate::helpers::store_env(dir))
        .env("QUIRE_ADMIN_PASSWORD", password)
        .env("QUIRE_EMBEDDING_USE_CACHED_MODEL", "false")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    let listening = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            log.push_str(&line);
            log.push('\n');
            if line.contains("listening on ") {
                return true;
            }
        }
        false
    })
    .await
    .expect("the server neither started nor stopped");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    (listening, log)
}

#[tokio::test]
async fn the_environment_sets_the_first_password_only() {
    let dir = tempfile::tempdir().unwrap();
    let (listening, log) = serve_with_env_password(dir.path(), "short").await;
    assert!(!listening);
    assert!(log.contains("at least 10 characters"), "{log}");

    let (listening, log) = serve_with_env_password(dir.path(), PASSWORD).await;
    assert!(listening, "{log}");
    assert!(
        log.contains("admin password was set from QUIRE_ADMIN_PASSWORD"),
        "{log}"
    );
    assert!(!log.contains(PASSWORD), "the password reached the log");
    let store = quire::open_store(&crate::helpers::test_config(dir.path()))
        .await
        .unwrap();
    let first = store.admin_password_hash().await.unwrap().unwrap();
    assert!(quire_admin::password::verify(PASSWORD, &first).unwrap());

    // Once a password is stored, the variable is ignored.
    let (listening, log) = serve_with_env_password(dir.path(), "some other password").await;
    assert!(listening, "{log}");
    assert_eq!(store.admin_password_hash().await.unwrap(), Some(first));
    store.close().await;
}
