//! Sources that sync from a web site, against a local site the test serves (127.0.0.1) and
//! counts requests on: a first run takes the pages robots.txt allows, a change becomes a new
//! version, a page gone a deletion, and an unchanged run costs only conditional requests
//! answered 304. The site is on loopback, so these servers allow private targets; without
//! that setting, the same site is refused when the source is made (quire-sync's own tests
//! show a redirect to loopback refused mid-run while the site itself is let through).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode as AxumStatus, Uri, header};
use axum::response::{IntoResponse, Response};
use quire_core::Permission;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestServer, assert_error, body};
use crate::syncs::finished_run;

/// Pages by path, and every request as (path, conditional, status).
#[derive(Default)]
struct SiteState {
    pages: HashMap<String, (&'static str, String)>,
    log: Vec<(String, bool, u16)>,
}

/// A web site served from the test's process on loopback, logging every request.
pub(crate) struct Site {
    addr: SocketAddr,
    state: Arc<Mutex<SiteState>>,
}

impl Site {
    /// Starts serving (no pages yet).
    pub(crate) async fn start() -> Self {
        let state = Arc::new(Mutex::new(SiteState::default()));
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, state }
    }

    /// The address of `path` on the site.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Serves `body` as `content_type` at `path` from now on.
    pub(crate) fn put(&self, path: &str, content_type: &'static str, body: String) {
        self.state
            .lock()
            .unwrap()
            .pages
            .insert(path.into(), (content_type, body));
    }

    fn page(&self, path: &str, title: &str, links: &[&str], text: &str) {
        let nav: String = links
            .iter()
            .map(|l| format!("<a href=\"{l}\">{l}</a> "))
            .collect();
        self.put(
            path,
            "text/html; charset=utf-8",
            format!(
                "<!doctype html><html lang=\"en\"><head><title>{title}</title></head><body>\
                 <nav>{nav} Site menu</nav><main><h1>{title}</h1><p>{text}</p></main>\
                 <footer>Copyright Example Pumps Ltd</footer></body></html>"
            ),
        );
    }

    fn remove(&self, path: &str) {
        self.state.lock().unwrap().pages.remove(path);
    }

    fn take_log(&self) -> Vec<(String, bool, u16)> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }
}

async fn serve(
    axum::extract::State(state): axum::extract::State<Arc<Mutex<SiteState>>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path().to_owned();
    let conditional = headers.contains_key(header::IF_NONE_MATCH);
    let mut state = state.lock().unwrap();
    let response = match state.pages.get(&path).cloned() {
        None => AxumStatus::NOT_FOUND.into_response(),
        Some((content_type, page)) => {
            use sha2::Digest as _;
            let etag = format!(
                "\"{}\"",
                &hex::encode(sha2::Sha256::digest(page.as_bytes()))[..16]
            );
            let matches = headers
                .get(header::IF_NONE_MATCH)
                .is_some_and(|v| v.to_str().unwrap() == etag);
            if matches {
                (AxumStatus::NOT_MODIFIED, [(header::ETAG, etag)]).into_response()
            } else {
                (
                    [
                        (header::CONTENT_TYPE, content_type.to_owned()),
                        (header::ETAG, etag),
                    ],
                    page,
                )
                    .into_response()
            }
        }
    };
    state
        .log
        .push((path, conditional, response.status().as_u16()));
    response
}

fn counts(run: &Value) -> Vec<Value> {
    ["added", "updated", "deleted", "unchanged", "failed"]
        .iter()
        .map(|k| run[*k].clone())
        .collect()
}

async fn sync_now(server: &TestServer, key: &str, id: &str, runs_before: usize) -> Value {
    let started = server
        .post_json(key, &format!("/api/v1/sources/{id}/sync"), &json!({}))
        .await;
    assert_eq!(started.status(), StatusCode::ACCEPTED);
    finished_run(server, key, id, runs_before).await
}

#[tokio::test]
async fn a_web_source_follows_its_site() {
    let site = Site::start().await;
    site.put(
        "/robots.txt",
        "text/plain",
        "User-agent: *\nDisallow: /docs/private/\n".into(),
    );
    site.page(
        "/docs/",
        "Plant handbook",
        &[
            "pumps.html",
            "valves.html",
            "old.html",
            "private/salaries.html",
        ],
        "Welcome to the plant handbook.",
    );
    site.page(
        "/docs/pumps.html",
        "Pumps",
        &["/docs/"],
        "Prime the pump before starting it.",
    );
    site.page(
        "/docs/valves.html",
        "Valves",
        &["/docs/"],
        "Open gate valves fully.",
    );
    site.page("/docs/old.html", "Old", &[], "This note is obsolete.");
    site.page(
        "/docs/private/salaries.html",
        "Salaries",
        &[],
        "Never to be read.",
    );
    let server = TestServer::start_with(|c| c.connectors.allow_private_targets = true).await;
    let admin = server.key(Permission::Admin).await;
    let response = server
        .post_json(
            &admin,
            "/api/v1/sources",
            &json!({"name": "Handbook site", "type": "web",
                "sync": {"url": site.url("/docs/"), "maxPages": 50, "maxDepth": 3,
                         "intervalSeconds": 0}}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let source = body(response).await;
    assert_eq!(source["type"], "web");
    assert_eq!(source["sync"]["settings"]["maxPages"], 50);
    let id = source["id"].as_str().unwrap().to_owned();

    // The first run comes at once and takes every page robots.txt allows.
    let run = finished_run(&server, &admin, &id, 0).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(counts(&run)[0], json!(4), "{run}");
    assert_eq!(run["failed"], 0, "{run}");
    let log = site.take_log();
    assert!(
        log.iter().all(|(p, _, _)| !p.starts_with("/docs/private/")),
        "{log:?}"
    );
    server.drain().await;
    let listed = server.documents(&admin, &id).await;
    let by_url = |listed: &Value, path: &str| -> Value {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["externalId"] == site.url(path))
            .unwrap_or_else(|| panic!("{path}: {listed}"))
            .clone()
    };
    let mut external: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["externalId"].as_str().unwrap().to_owned())
        .collect();
    external.sort();
    assert_eq!(
        external,
        [
            "/docs/",
            "/docs/old.html",
            "/docs/pumps.html",
            "/docs/valves.html"
        ]
        .map(|p| site.url(p))
    );
    let pumps = by_url(&listed, "/docs/pumps.html");
    assert_eq!(pumps["metadata"]["title"], "Pumps", "{pumps}");
    assert_eq!(pumps["metadata"]["language"], "en", "{pumps}");
    assert_eq!(pumps["status"], "ready", "{pumps}");
    let found = body(
        server
            .search(&admin, json!({"query": "prime the pump before starting"}))
            .await,
    )
    .await;
    assert_eq!(
        found["results"][0]["document"]["id"], pumps["id"],
        "{found}"
    );
    // Each page's main text is kept; the footer every page repeats is not.
    let boilerplate = body(
        server
            .search(&admin, json!({"query": "Copyright Example Pumps Ltd"}))
            .await,
    )
    .await;
    assert!(
        !boilerplate["results"].to_string().contains("Copyright"),
        "{boilerplate}"
    );

    // The site changes: a page is edited, another disappears (and the index stops linking
    // to it, so the index changes too).
    site.page(
        "/docs/pumps.html",
        "Pumps",
        &["/docs/"],
        "Vent the casing before starting the pump.",
    );
    site.remove("/docs/old.html");
    site.page(
        "/docs/",
        "Plant handbook",
        &["pumps.html", "valves.html", "private/salaries.html"],
        "Welcome to the plant handbook.",
    );
    let run = sync_now(&server, &admin, &id, 1).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(
        counts(&run),
        [json!(0), json!(2), json!(1), json!(1), json!(0)],
        "{run}"
    );
    server.drain().await;
    let listed = server.documents(&admin, &id).await;
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    let updated = by_url(&listed, "/docs/pumps.html");
    assert_eq!(updated["id"], pumps["id"], "the same document");
    assert_eq!(updated["version"], 2, "{updated}");
    let found = body(
        server
            .search(&admin, json!({"query": "vent the casing"}))
            .await,
    )
    .await;
    assert_eq!(
        found["results"][0]["document"]["id"], pumps["id"],
        "{found}"
    );

    // Nothing changes: every page costs one conditional request answered 304.
    site.take_log();
    let run = sync_now(&server, &admin, &id, 2).await;
    assert_eq!(
        counts(&run),
        [json!(0), json!(0), json!(0), json!(3), json!(0)],
        "{run}"
    );
    let log = site.take_log();
    let pages: Vec<_> = log.iter().filter(|(p, _, _)| p != "/robots.txt").collect();
    assert!(
        pages
            .iter()
            .all(|(_, conditional, status)| *conditional && *status == 304),
        "only conditional requests answered 304: {log:?}"
    );
    assert_eq!(pages.len(), 3, "one request per page: {log:?}");

    // A site that cannot be reached fails the run with the reason.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!("http://{}/docs/", closed.local_addr().unwrap());
    drop(closed);
    let dead = body(
        server
            .post_json(
                &admin,
                "/api/v1/sources",
                &json!({"name": "Gone site", "type": "web",
                    "sync": {"url": unreachable, "intervalSeconds": 0}}),
            )
            .await,
    )
    .await;
    let run = finished_run(&server, &admin, dead["id"].as_str().unwrap(), 0).await;
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error"].as_str().unwrap();
    assert!(
        error.contains("listed") && error.contains("connection refused"),
        "{error}"
    );
}

#[tokio::test]
async fn web_sources_are_refused_with_reasons() {
    let site = Site::start().await;
    site.page("/docs/", "Home", &[], "Home.");
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    let writer = server.key(Permission::ReadWrite).await;
    let url = site.url("/docs/");
    // Without connectors.allow_private_targets, a site on loopback is refused before a byte
    // is fetched, and the answer names the address and the setting.
    let refused = assert_error(
        server
            .post_json(
                &admin,
                "/api/v1/sources",
                &json!({"name": "Local", "type": "web", "sync": {"url": url}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("127.0.0.1 is a loopback address")
            && message.contains("connectors.allow_private_targets"),
        "{message}"
    );
    for (sync, needle) in [
        (json!({"url": "ftp://example.com/"}), "http"),
        (
            json!({"url": "https://user:pw@example.com/"}),
            "credentials",
        ),
        (json!({}), "url"),
        (
            json!({"url": "https://example.com/", "maxPages": 0}),
            "maxPages",
        ),
        (
            json!({"url": "https://example.com/", "maxPages": 100_000}),
            "maxPages",
        ),
        (
            json!({"url": "https://example.com/", "maxDepth": -1}),
            "maxDepth",
        ),
        (
            json!({"url": "https://example.com/", "maxDepth": "2"}),
            "maxDepth",
        ),
        (json!({"url": "https://example.com/", "path": "/x"}), "path"),
    ] {
        let refused = assert_error(
            server
                .post_json(
                    &admin,
                    "/api/v1/sources",
                    &json!({"name": "W", "type": "web", "sync": sync.clone()}),
                )
                .await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
        let message = refused["message"].as_str().unwrap();
        assert!(message.contains(needle), "{sync}: {message}");
    }
    // A read-write key may not make the server fetch on its behalf.
    assert_error(
        server
            .post_json(
                &writer,
                "/api/v1/sources",
                &json!({"name": "W", "type": "web", "sync": {"url": "https://example.com/"}}),
            )
            .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert!(site.take_log().is_empty(), "nothing reached the site");
}
