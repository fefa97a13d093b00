//! The web origin against a real local site (axum on 127.0.0.1) that counts every request:
//! sitemaps and indexes, link crawls with their caps, robots.txt, conditional requests,
//! changes and deletions, redirects the guard refuses, Retry-After and the size limit.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;

use super::*;

/// One resource of the test site.
#[derive(Clone)]
enum Resource {
    /// A page or file: content type and body; its ETag is derived from the body.
    Page(&'static str, String),
    /// A redirect (302) to this location.
    Redirect(String),
    /// Bytes served as they are (a gzip sitemap), without validators.
    Binary(&'static str, Vec<u8>),
}

/// What the site holds and what it was asked.
#[derive(Default)]
struct SiteState {
    resources: HashMap<String, Resource>,
    /// Per path: how many times to answer 503 with this Retry-After first.
    busy: HashMap<String, (u32, u64)>,
    /// Every request: path (with query), whether it was conditional, status answered.
    log: Vec<(String, bool, u16)>,
    /// How long each answer takes.
    delay: std::time::Duration,
    /// Requests being answered now, and the most there ever were at once.
    in_flight: usize,
    most_in_flight: usize,
}

struct Site {
    addr: SocketAddr,
    state: Arc<Mutex<SiteState>>,
}

impl Site {
    async fn start() -> Self {
        let state = Arc::new(Mutex::new(SiteState::default()));
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, state }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn page(&self, path: &str, body: &str) {
        self.put(
            path,
            Resource::Page("text/html; charset=utf-8", body.into()),
        );
    }

    fn put(&self, path: &str, resource: Resource) {
        self.state
            .lock()
            .unwrap()
            .resources
            .insert(path.into(), resource);
    }

    fn remove(&self, path: &str) {
        self.state.lock().unwrap().resources.remove(path);
    }

    /// The requests since the last call, and forgets them.
    fn take_log(&self) -> Vec<(String, bool, u16)> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }

    /// A spec for this site, with every internal address refused but the site's own.
    fn origin(&self, path: &str, max_pages: u64, max_depth: u64) -> WebOrigin {
        self.origin_with(path, max_pages, max_depth, Patterns::all(), 1 << 20)
    }

    fn origin_with(
        &self,
        path: &str,
        max_pages: u64,
        max_depth: u64,
        patterns: Patterns,
        max_page_bytes: u64,
    ) -> WebOrigin {
        let spec = WebSpec {
            url: self.url(path),
            max_pages,
            max_depth,
            allow_private: false,
            max_page_bytes,
            spool_in: None,
        };
        WebOrigin::new(&spec, patterns)
            .unwrap()
            .with_test_site(self.addr)
    }
}

async fn serve(
    axum::extract::State(shared): axum::extract::State<Arc<Mutex<SiteState>>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let delay = {
        let mut state = shared.lock().unwrap();
        state.in_flight += 1;
        state.most_in_flight = state.most_in_flight.max(state.in_flight);
        state.delay
    };
    tokio::time::sleep(delay).await;
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let conditional = headers.contains_key(header::IF_NONE_MATCH);
    let mut state = shared.lock().unwrap();
    state.in_flight -= 1;
    let response = if let Some((left, seconds)) = state.busy.get_mut(&path).filter(|b| b.0 > 0) {
        *left -= 1;
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, seconds.to_string())],
        )
            .into_response()
    } else {
        match state.resources.get(&path).cloned() {
            None => StatusCode::NOT_FOUND.into_response(),
            Some(Resource::Redirect(to)) => {
                (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
            }
            Some(Resource::Binary(content_type, bytes)) => {
                ([(header::CONTENT_TYPE, content_type)], bytes).into_response()
            }
            Some(Resource::Page(content_type, body)) => {
                let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&body))[..16]);
                if headers
                    .get(header::IF_NONE_MATCH)
                    .is_some_and(|v| v.to_str().unwrap() == etag)
                {
                    (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response()
                } else {
                    (
                        [
                            (header::CONTENT_TYPE, content_type.to_owned()),
                            (header::ETAG, etag),
                        ],
                        body,
                    )
                        .into_response()
                }
            }
        }
    };
    state
        .log
        .push((path, conditional, response.status().as_u16()));
    response
}

fn ids(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i.external_id.as_str()).collect()
}

fn previous(items: &[Item]) -> HashMap<String, String> {
    items
        .iter()
        .map(|i| (i.external_id.clone(), i.fingerprint.clone()))
        .collect()
}

async fn text(origin: &WebOrigin, item: &Item) -> String {
    let chunks: Vec<Bytes> = origin
        .open(item)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    String::from_utf8(chunks.concat()).unwrap()
}

fn paths(log: &[(String, bool, u16)]) -> HashSet<&str> {
    log.iter().map(|(p, _, _)| p.as_str()).collect()
}

fn link_page(title: &str, links: &[&str]) -> String {
    let anchors: String = links
        .iter()
        .map(|l| format!("<a href=\"{l}\">{l}</a> "))
        .collect();
    format!(
        "<!doctype html><html lang=\"en\"><head><title>{title}</title></head>\
         <body><nav>{anchors}</nav><main><p>{title} text.</p></main></body></html>"
    )
}

#[tokio::test]
async fn a_crawl_follows_links_on_the_site_within_depth_and_page_caps() {
    let site = Site::start().await;
    site.page(
        "/docs/",
        &link_page(
            "Home",
            &[
                "a.html",
                "b.html#part",
                "/other/x.html",
                "http://elsewhere.invalid/y",
            ],
        ),
    );
    site.page("/docs/a.html", &link_page("A", &["deep/c.html", "/docs/"]));
    site.page("/docs/b.html", &link_page("B", &[]));
    site.page("/docs/deep/c.html", &link_page("C", &["d.html"]));
    site.page("/docs/deep/d.html", &link_page("D", &[]));
    site.page("/other/x.html", &link_page("X", &[]));

    let items = site.origin("/docs/", 100, 2).list().await.unwrap();
    assert_eq!(
        ids(&items),
        [
            site.url("/docs/"),
            site.url("/docs/a.html"),
            site.url("/docs/b.html"),
            site.url("/docs/deep/c.html"),
        ]
    );
    let log = site.take_log();
    let asked = paths(&log);
    // Outside the start page's path, and beyond the depth: never requested.
    assert!(!asked.contains("/other/x.html"), "{log:?}");
    assert!(!asked.contains("/docs/deep/d.html"), "{log:?}");
    assert!(asked.contains("/robots.txt"));
    // Each page once, robots.txt once: the start page reached again by a link is not re-read.
    assert_eq!(log.len(), 5, "{log:?}");

    let a = &items[1];
    assert_eq!(a.name, "a.html");
    assert_eq!(a.metadata["title"], "A");
    assert_eq!(a.metadata["language"], "en");
    assert_eq!(items[0].name, "index.html");

    let capped = site.origin("/docs/", 2, 5).list().await.unwrap();
    assert_eq!(ids(&capped), [site.url("/docs/"), site.url("/docs/a.html")]);
    let only_start = site.origin("/docs/", 100, 0).list().await.unwrap();
    assert_eq!(ids(&only_start), [site.url("/docs/")]);
}

/// Two web sources of one site listing at once (two runs on one node) still send it one
/// request at a time.
#[tokio::test]
async fn two_sources_of_one_host_take_turns() {
    let site = Site::start().await;
    let pages: Vec<String> = (0..6).map(|i| format!("p{i}.html")).collect();
    let links: Vec<&str> = pages.iter().map(String::as_str).collect();
    site.page("/docs/", &link_page("Home", &links));
    for page in &pages {
        site.page(&format!("/docs/{page}"), &link_page(page, &[]));
    }
    site.state.lock().unwrap().delay = std::time::Duration::from_millis(20);
    let (first, second) = (site.origin("/docs/", 100, 1), site.origin("/docs/", 100, 1));
    let (a, b) = tokio::join!(first.list(), second.list());
    assert_eq!((a.unwrap().len(), b.unwrap().len()), (7, 7));
    let state = site.state.lock().unwrap();
    assert!(state.log.len() >= 14, "{:?}", state.log);
    assert_eq!(state.most_in_flight, 1);
}

#[tokio::test]
async fn a_pages_body_is_served_from_the_listing_without_a_second_request() {
    let site = Site::start().await;
    site.page("/docs/", &link_page("Home", &["a.html"]));
    site.page("/docs/a.html", &link_page("Pumps", &[]));
    let origin = site.origin("/docs/", 100, 3);
    let items = origin.list().await.unwrap();
    site.take_log();
    assert!(text(&origin, &items[1]).await.contains("Pumps text."));
    assert!(site.take_log().is_empty(), "open() read the spooled page");
}

#[tokio::test]
async fn a_runs_pages_wait_in_a_directory_of_its_own_under_the_given_one() {
    let site = Site::start().await;
    site.page("/docs/", &link_page("Home", &["a.html"]));
    site.page("/docs/a.html", &link_page("Pumps", &[]));
    let staging = tempfile::tempdir().unwrap();
    let spec = WebSpec {
        url: site.url("/docs/"),
        max_pages: 100,
        max_depth: 3,
        allow_private: false,
        max_page_bytes: 1 << 20,
        spool_in: Some(staging.path().to_owned()),
    };
    let origin = WebOrigin::new(&spec, Patterns::all())
        .unwrap()
        .with_test_site(site.addr);
    let spooled = || {
        std::fs::read_dir(staging.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    let items = origin.list().await.unwrap();
    let during = spooled();
    assert!(
        during.len() == 1 && during[0].starts_with("web-"),
        "{during:?}"
    );
    assert!(text(&origin, &items[1]).await.contains("Pumps text."));
    // The run's end (the origin dropped) takes its pages with it.
    drop(origin);
    assert!(spooled().is_empty(), "{:?}", spooled());
}

#[tokio::test]
async fn robots_txt_disallowed_paths_are_never_fetched() {
    let site = Site::start().await;
    site.put(
        "/robots.txt",
        Resource::Page(
            "text/plain",
            "User-agent: *\nDisallow: /docs/private/\n\nUser-agent: OtherBot\nDisallow: /\n".into(),
        ),
    );
    site.page(
        "/docs/",
        &link_page("Home", &["private/secret.html", "public.html"]),
    );
    site.page("/docs/private/secret.html", &link_page("Secret", &[]));
    site.page("/docs/public.html", &link_page("Public", &[]));

    let items = site.origin("/docs/", 100, 3).list().await.unwrap();
    assert_eq!(
        ids(&items),
        [site.url("/docs/"), site.url("/docs/public.html")]
    );
    let log = site.take_log();
    assert!(
        !paths(&log).contains("/docs/private/secret.html"),
        "{log:?}"
    );

    // A start URL robots.txt disallows fails the run, without fetching it.
    let refused = site
        .origin("/docs/private/secret.html", 100, 3)
        .list()
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("robots.txt"), "{refused}");
    assert!(!paths(&site.take_log()).contains("/docs/private/secret.html"));
}

#[tokio::test]
async fn a_sitemap_index_and_its_sitemaps_list_the_pages() {
    let site = Site::start().await;
    let sitemap = |entries: &[(&str, Option<&str>)]| {
        let urls: String = entries
            .iter()
            .map(|(loc, lastmod)| {
                let lastmod = lastmod
                    .map(|l| format!("<lastmod>{l}</lastmod>"))
                    .unwrap_or_default();
                format!("<url><loc>{loc}</loc>{lastmod}</url>")
            })
            .collect();
        format!(
            "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{urls}</urlset>"
        )
    };
    site.put(
        "/sitemap.xml",
        Resource::Page(
            "application/xml",
            format!(
                "<sitemapindex><sitemap><loc>{}</loc></sitemap><sitemap><loc>{}</loc></sitemap></sitemapindex>",
                site.url("/maps/one.xml"),
                site.url("/maps/two.xml.gz")
            ),
        ),
    );
    let one = site.url("/guide/one.html");
    let two = site.url("/guide/two.html");
    let gone = site.url("/guide/gone.html");
    site.put(
        "/maps/one.xml",
        Resource::Page(
            "application/xml",
            sitemap(&[
                (&one, Some("2024-05-01")),
                ("http://elsewhere.invalid/x", None),
            ]),
        ),
    );
    // The second sitemap is compressed, as large sites serve theirs.
    let compressed = {
        use std::io::Write as _;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(sitemap(&[(&two, None), (&gone, Some("2024-01-01"))]).as_bytes())
            .unwrap();
        gz.finish().unwrap()
    };
    site.put(
        "/maps/two.xml.gz",
        Resource::Binary("application/gzip", compressed),
    );
    site.page(
        "/guide/one.html",
        &link_page("One", &["/guide/unlisted.html"]),
    );
    site.page("/guide/two.html", &link_page("Two", &[]));
    site.page("/guide/unlisted.html", &link_page("Unlisted", &[]));

    let origin = site.origin("/sitemap.xml", 100, 5);
    let items = origin.list().await.unwrap();
    // Listed pages only (links are not followed from a sitemap); a 404 is simply absent.
    assert_eq!(ids(&items), [one.as_str(), two.as_str()]);
    assert_eq!(items[0].metadata["modifiedAt"], "2024-05-01T00:00:00Z");
    assert_eq!(items[0].metadata["title"], "One");
    let log = site.take_log();
    assert!(!paths(&log).contains("/guide/unlisted.html"), "{log:?}");

    // Again, unchanged: the page with the same <lastmod> costs no request, the other a 304.
    let again = origin_again(&site, "/sitemap.xml")
        .list_since(&previous(&items))
        .await
        .unwrap();
    assert_eq!(previous(&again), previous(&items));
    let log = site.take_log();
    assert!(!paths(&log).contains("/guide/one.html"), "{log:?}");
    assert!(
        log.iter()
            .any(|(p, conditional, status)| p == "/guide/two.html"
                && *conditional
                && *status == 304),
        "{log:?}"
    );

    // An unreachable sitemap fails the run rather than losing its pages.
    site.remove("/maps/two.xml.gz");
    let failed = origin_again(&site, "/sitemap.xml")
        .list_since(&previous(&items))
        .await
        .unwrap_err();
    assert!(failed.to_string().contains("/maps/two.xml"), "{failed}");
    assert!(failed.to_string().contains("404"), "{failed}");
}

fn origin_again(site: &Site, path: &str) -> WebOrigin {
    site.origin(path, 100, 5)
}

#[tokio::test]
async fn an_unchanged_site_costs_only_304s_and_changes_and_deletions_show() {
    let site = Site::start().await;
    site.page("/docs/", &link_page("Home", &["a.html"]));
    // b is reachable only through a: when a answers 304, its kept links lead on to b.
    site.page("/docs/a.html", &link_page("A", &["b.html", "c.html"]));
    site.page("/docs/b.html", &link_page("B", &[]));
    site.page("/docs/c.html", &link_page("C", &[]));
    let first = site.origin("/docs/", 100, 5).list().await.unwrap();
    assert_eq!(first.len(), 4);
    site.take_log();

    let again = site
        .origin("/docs/", 100, 5)
        .list_since(&previous(&first))
        .await
        .unwrap();
    assert_eq!(previous(&again), previous(&first), "every page unchanged");
    let log = site.take_log();
    let pages: Vec<_> = log.iter().filter(|(p, _, _)| p != "/robots.txt").collect();
    assert_eq!(pages.len(), 4, "{log:?}");
    assert!(
        pages
            .iter()
            .all(|(_, conditional, status)| *conditional && *status == 304),
        "only conditional requests answered 304: {log:?}"
    );

    // b changes, c disappears.
    site.page("/docs/b.html", &link_page("B, revised", &[]));
    site.remove("/docs/c.html");
    let origin = site.origin("/docs/", 100, 5);
    let third = origin.list_since(&previous(&first)).await.unwrap();
    assert_eq!(
        ids(&third),
        [
            site.url("/docs/"),
            site.url("/docs/a.html"),
            site.url("/docs/b.html")
        ]
    );
    let b = &third[2];
    assert_ne!(b.fingerprint, previous(&first)[&b.external_id]);
    assert_eq!(b.metadata["title"], "B, revised");
    assert_eq!(
        third[1].fingerprint,
        previous(&first)[&third[1].external_id]
    );
    site.take_log();
    assert!(text(&origin, b).await.contains("B, revised text."));
    assert!(site.take_log().is_empty());

    // An unchanged page wanted again (its document was deleted) is fetched whole by open().
    let a = &third[1];
    assert!(text(&origin, a).await.contains("A text."));
    let log = site.take_log();
    assert_eq!(log, [("/docs/a.html".to_owned(), false, 200)]);
}

#[tokio::test]
async fn a_redirect_to_an_internal_address_is_refused_by_the_guard() {
    let site = Site::start().await;
    // Another loopback port (nothing listens there): internal, and not the site the test
    // lets through.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let internal = format!("http://{}/admin", other.local_addr().unwrap());
    drop(other);
    site.page("/docs/", &link_page("Home", &["moved.html", "ok.html"]));
    site.put("/docs/moved.html", Resource::Redirect(internal.clone()));
    site.page("/docs/ok.html", &link_page("Ok", &[]));
    let origin = site.origin("/docs/", 100, 3);
    let items = origin.list().await.unwrap();
    // The failing page is listed, so its reason is recorded; the run goes on.
    assert_eq!(items.len(), 3);
    let moved = items
        .iter()
        .find(|i| i.external_id.ends_with("moved.html"))
        .unwrap();
    let reason = origin.open(moved).await.err().unwrap().to_string();
    assert!(reason.contains(&internal), "{reason}");
    assert!(
        reason.contains("127.0.0.1 is a loopback address"),
        "{reason}"
    );
    assert!(
        reason.contains("connectors.allow_private_targets"),
        "{reason}"
    );
    let ok = items
        .iter()
        .find(|i| i.external_id.ends_with("ok.html"))
        .unwrap();
    assert!(text(&origin, ok).await.contains("Ok text."));

    // A start page that redirects there fails the run.
    site.put("/start/", Resource::Redirect(internal.clone()));
    let failed = site.origin("/start/", 100, 3).list().await.unwrap_err();
    assert!(failed.to_string().contains("loopback"), "{failed}");

    // And without the test's exception the site itself, on loopback, is refused, robots.txt
    // first.
    let spec = WebSpec {
        url: site.url("/docs/"),
        max_pages: 10,
        max_depth: 1,
        allow_private: false,
        max_page_bytes: 1 << 20,
        spool_in: None,
    };
    site.take_log();
    let refused = WebOrigin::new(&spec, Patterns::all())
        .unwrap()
        .list()
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("/robots.txt"), "{refused}");
    assert!(
        refused.contains("127.0.0.1 is a loopback address"),
        "{refused}"
    );
    assert!(site.take_log().is_empty(), "nothing reached the site");
    assert!(
        check_target(&site.url("/docs/"), false)
            .await
            .unwrap_err()
            .to_string()
            .contains("connectors.allow_private_targets")
    );
    check_target(&site.url("/docs/"), true).await.unwrap();
    // The setting lets the site through; the redirect, now past the guard, leaves the site
    // (another port) and is skipped.
    let allowed = WebOrigin::new(
        &WebSpec {
            allow_private: true,
            ..spec
        },
        Patterns::all(),
    )
    .unwrap();
    let items = allowed.list().await.unwrap();
    assert_eq!(ids(&items), [site.url("/docs/"), site.url("/docs/ok.html")]);
}

#[tokio::test]
async fn retry_after_is_waited_out_within_a_bound() {
    let site = Site::start().await;
    site.page("/docs/", &link_page("Home", &["slow.html", "busy.html"]));
    site.page("/docs/slow.html", &link_page("Slow", &[]));
    site.page("/docs/busy.html", &link_page("Busy", &[]));
    {
        let mut state = site.state.lock().unwrap();
        state.busy.insert("/docs/slow.html".into(), (1, 1));
        state.busy.insert("/docs/busy.html".into(), (1, 3600));
    }
    let origin = site.origin("/docs/", 100, 3);
    let started = std::time::Instant::now();
    let items = origin.list().await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    let log = site.take_log();
    let slow: Vec<u16> = log
        .iter()
        .filter(|(p, _, _)| p == "/docs/slow.html")
        .map(|(_, _, s)| *s)
        .collect();
    assert_eq!(slow, [503, 200], "{log:?}");
    let slow = items
        .iter()
        .find(|i| i.external_id.ends_with("slow.html"))
        .unwrap();
    assert!(text(&origin, slow).await.contains("Slow text."));
    // An hour is not waited: the page fails with the reason.
    let busy = items
        .iter()
        .find(|i| i.external_id.ends_with("busy.html"))
        .unwrap();
    let reason = origin.open(busy).await.err().unwrap().to_string();
    assert!(
        reason.contains("503") && reason.contains("Retry-After 3600"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_page_over_the_size_limit_fails_alone() {
    let site = Site::start().await;
    site.page("/docs/", &link_page("Home", &["big.html"]));
    site.page("/docs/big.html", &"x".repeat(4096));
    let origin = site.origin_with("/docs/", 100, 3, Patterns::all(), 2048);
    let items = origin.list().await.unwrap();
    assert_eq!(items.len(), 2);
    let reason = origin.open(&items[1]).await.err().unwrap().to_string();
    assert!(reason.contains("upload limit of 2048 bytes"), "{reason}");
}

#[tokio::test]
async fn patterns_choose_pages_and_excluded_ones_are_not_fetched() {
    let site = Site::start().await;
    site.page(
        "/docs/",
        &link_page("Home", &["keep.html", "drafts/x.html"]),
    );
    site.page("/docs/keep.html", &link_page("Keep", &[]));
    site.page("/docs/drafts/x.html", &link_page("Draft", &[]));
    let patterns = Patterns::new(&[], &["**/drafts/**".into()]).unwrap();
    let items = site
        .origin_with("/docs/", 100, 3, patterns, 1 << 20)
        .list()
        .await
        .unwrap();
    assert_eq!(
        ids(&items),
        [site.url("/docs/"), site.url("/docs/keep.html")]
    );
    assert!(!paths(&site.take_log()).contains("/docs/drafts/x.html"));
}

#[test]
fn bad_urls_are_invalid() {
    for url in [
        "ftp://x.example/",
        "not a url",
        "https://user:pw@x.example/",
    ] {
        let spec = WebSpec {
            url: url.into(),
            max_pages: 1,
            max_depth: 0,
            allow_private: false,
            max_page_bytes: 1,
            spool_in: None,
        };
        assert!(
            matches!(
                WebOrigin::new(&spec, Patterns::all()),
                Err(SyncError::Invalid(_))
            ),
            "{url}"
        );
    }
}

#[test]
fn file_names_end_as_the_parser_needs() {
    let url = |u: &str| Url::parse(u).unwrap();
    assert_eq!(
        file_name(&url("https://x/a/"), true, "text/html"),
        "index.html"
    );
    assert_eq!(
        file_name(&url("https://x/a/pumps"), true, "text/html"),
        "pumps.html"
    );
    assert_eq!(
        file_name(&url("https://x/a/b.htm"), true, "text/html"),
        "b.htm"
    );
    assert_eq!(
        file_name(
            &url("https://x/r%C3%A9sum%C3%A9.pdf"),
            false,
            "application/pdf"
        ),
        "résumé.pdf"
    );
    assert_eq!(
        file_name(&url("https://x/notes"), false, "text/plain"),
        "notes.txt"
    );
}
