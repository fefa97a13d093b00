//! A web site as an origin: the pages a sitemap lists (sitemap indexes followed), or the pages
//! reachable by links from a start page within its host and path, breadth first.
//!
//! Polite and bounded: `robots.txt` is obeyed, one request at a time, a clear `User-Agent`,
//! `Retry-After` waited out (within a bound), bodies capped at the upload limit, a timeout per
//! request, at most `maxPages` pages. Cheap when nothing changed: each page's validators are
//! kept in its fingerprint and sent back, so an unchanged page costs a 304 (or, listed in a
//! sitemap with the same `<lastmod>`, no request at all); its links are kept too, so the crawl
//! goes on through it without its body. Every hop (redirects, robots.txt and sitemaps
//! included) goes through the SSRF guard of `quire-netguard`; see [`fetch`].

mod fetch;
mod hosts;
mod page;
mod robots;
mod sitemap;
mod state;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use quire_netguard::{Guard, TargetError, Url, check_url};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_LANGUAGE, CONTENT_TYPE};
use sha2::{Digest, Sha256};

use self::fetch::{Answer, FetchError, Fetcher, Validators};
pub use self::fetch::{MAX_RETRY_WAIT, USER_AGENT};
use self::robots::Robots;
use self::state::PageState;
use crate::{Item, MODIFIED_AT, Origin, Patterns, SyncError};

/// Pages a run takes when `maxPages` is not given.
pub const DEFAULT_MAX_PAGES: u64 = 1_000;
/// Most pages a run may take.
pub const MAX_PAGES: u64 = 10_000;
/// Link depth from the start page when `maxDepth` is not given.
pub const DEFAULT_MAX_DEPTH: u64 = 5;
/// Deepest link depth allowed.
pub const MAX_DEPTH: u64 = 20;
/// The setting that lets web sources reach internal addresses, named in refusals.
pub const ALLOW_PRIVATE_SETTING: &str = "connectors.allow_private_targets";
/// Sitemap files read in one run at most (an index and the sitemaps it names).
const MAX_SITEMAPS: usize = 100;
/// How deep sitemap indexes may nest below the first sitemap.
const MAX_SITEMAP_NESTING: usize = 2;
/// The metadata key of a page's `<title>`.
const TITLE: &str = "title";
/// The metadata key of a page's language (`<html lang>`, else `Content-Language`).
const LANGUAGE: &str = "language";

/// How to read a web site.
#[derive(Debug, Clone)]
pub struct WebSpec {
    /// A sitemap (a URL whose path ends in `.xml`, or `.xml.gz` compressed) or a start page;
    /// http or https.
    pub url: String,
    /// Most pages taken per run.
    pub max_pages: u64,
    /// Most links followed from the start page (0: the start page alone); not used with a
    /// sitemap.
    pub max_depth: u64,
    /// Whether internal addresses (loopback, private, link-local) may be reached
    /// (`connectors.allow_private_targets`).
    pub allow_private: bool,
    /// The largest page taken, in bytes (`limits.max_upload_bytes`).
    pub max_page_bytes: u64,
    /// Where a run's fetched pages wait for their upload: a directory of its own is made
    /// in it, and removed when the run ends. The server's staging area, cleared at start,
    /// so a run cut short by a kill leaves nothing behind; `None`: the system's temporary
    /// directory.
    pub spool_in: Option<PathBuf>,
}

/// Where a fetched page waits for [`Origin::open`].
enum Body {
    /// Spooled to this file during the listing.
    File(PathBuf),
    /// Could not be fetched: why.
    Failed(String),
}

/// What one page's visit came to.
enum Visit {
    /// Fetched (2xx): where it answered from, its state and body.
    Fetched(Url, Box<PageState>, Bytes),
    /// Unchanged since the previous run (a 304, or the same sitemap `<lastmod>`).
    Unchanged,
    /// 404 or 410: the page is gone.
    Gone,
    /// Not the site's to take (a redirect out of it, disallowed by robots.txt): why.
    Skipped(String),
    /// Failed: why.
    Failed(String),
}

/// A web site, read by one run.
pub struct WebOrigin {
    start: Url,
    /// Pages must be under this path (the start URL's up to its last `/`).
    prefix: String,
    sitemap: bool,
    max_pages: usize,
    max_depth: usize,
    patterns: Patterns,
    fetcher: Fetcher,
    robots: tokio::sync::Mutex<Option<Arc<Robots>>>,
    bodies: Mutex<HashMap<String, Body>>,
    spool_in: Option<PathBuf>,
    spool: Mutex<Option<tempfile::TempDir>>,
}

impl std::fmt::Debug for WebOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebOrigin")
            .field("start", &self.start.as_str())
            .field("sitemap", &self.sitemap)
            .finish_non_exhaustive()
    }
}

impl WebOrigin {
    /// Validates the URL (http or https, a host, no credentials) and builds the client; a bad
    /// spec is [`SyncError::Invalid`]. Does not contact the site: see [`check_target`].
    pub fn new(spec: &WebSpec, patterns: Patterns) -> Result<Self, SyncError> {
        let mut start = check_url(&spec.url)
            .map_err(|e| SyncError::Invalid(format!("web url {:?}: {e}", spec.url)))?;
        start.set_fragment(None);
        let prefix = match start.path().rfind('/') {
            Some(slash) => start.path()[..=slash].to_owned(),
            None => "/".to_owned(),
        };
        let guard = Guard {
            allow_private: spec.allow_private,
            setting: ALLOW_PRIVATE_SETTING,
        };
        let fetcher = Fetcher::new(guard, spec.max_page_bytes).map_err(SyncError::Invalid)?;
        Ok(Self {
            sitemap: {
                let path = start.path().to_ascii_lowercase();
                path.ends_with(".xml") || path.ends_with(".xml.gz")
            },
            start,
            prefix,
            max_pages: usize::try_from(spec.max_pages.clamp(1, MAX_PAGES)).unwrap_or(1),
            max_depth: usize::try_from(spec.max_depth.min(MAX_DEPTH)).unwrap_or(0),
            patterns,
            fetcher,
            robots: tokio::sync::Mutex::new(None),
            bodies: Mutex::new(HashMap::new()),
            spool_in: spec.spool_in.clone(),
            spool: Mutex::new(None),
        })
    }

    /// Lets the unit tests' site (on loopback) through while every other internal address
    /// stays refused.
    #[cfg(test)]
    pub(crate) fn with_test_site(mut self, site: std::net::SocketAddr) -> Self {
        self.fetcher.test_site = Some(site);
        self
    }

    /// Whether `url` is on the source's site: same scheme, host and port, under its path.
    fn in_scope(&self, url: &Url) -> bool {
        url.origin() == self.start.origin() && url.path().starts_with(&self.prefix)
    }

    /// The site's robots.txt rules, fetched once per origin.
    async fn robots(&self) -> Result<Arc<Robots>, SyncError> {
        let mut cached = self.robots.lock().await;
        if let Some(robots) = cached.as_ref() {
            return Ok(Arc::clone(robots));
        }
        let location = robots::location(&self.start);
        let robots = match self.fetcher.get(&location, None, &|_| Ok(())).await {
            Ok(answer) if answer.status.is_success() => Robots::parse(&answer.body),
            Ok(answer) if answer.status.is_client_error() => Robots::All,
            Ok(answer) => Robots::Nothing(format!(
                "{location} answered HTTP {}",
                answer.status.as_u16()
            )),
            Err(e @ FetchError::Refused { .. }) => return Err(SyncError::Origin(e.to_string())),
            Err(e) => Robots::Nothing(format!("{location} could not be fetched: {e}")),
        };
        let robots = Arc::new(robots);
        *cached = Some(Arc::clone(&robots));
        Ok(robots)
    }

    /// Fetches `url` (conditionally, when the previous run left validators) and says what
    /// came of it.
    async fn visit(
        &self,
        url: &Url,
        previous: Option<&PageState>,
        lastmod: Option<&str>,
        robots: &Robots,
    ) -> Visit {
        let hop = |hop: &Url| {
            if !self.in_scope(hop) {
                return Err(format!(
                    "{url} redirects out of the source's site, to {hop}"
                ));
            }
            robots.refuses(hop).map_or(Ok(()), Err)
        };
        let validators = previous.map(|p| Validators {
            etag: p.etag.clone(),
            last_modified: p.last_modified.clone(),
        });
        let answer = match self.fetcher.get(url, validators.as_ref(), &hop).await {
            Ok(answer) => answer,
            Err(FetchError::Skipped(why)) => return Visit::Skipped(why),
            Err(e) => return Visit::Failed(e.to_string()),
        };
        match answer.status {
            StatusCode::NOT_MODIFIED if previous.is_some() => Visit::Unchanged,
            StatusCode::NOT_FOUND | StatusCode::GONE => Visit::Gone,
            status if status.is_success() => {
                let state = self.state(&answer, lastmod);
                Visit::Fetched(answer.url, Box::new(state), answer.body)
            }
            status => Visit::Failed(format!("HTTP {}", status.as_u16())),
        }
    }

    /// A fetched page's state: validators, hash, name, metadata, and links on the site.
    fn state(&self, answer: &Answer, lastmod: Option<&str>) -> PageState {
        let content_type = answer
            .header(CONTENT_TYPE)
            .map(|t| {
                t.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let html = matches!(content_type.as_str(), "text/html" | "application/xhtml+xml");
        let page = if html {
            page::read(&String::from_utf8_lossy(&answer.body), &answer.url)
        } else {
            page::Page::default()
        };
        let mut metadata = serde_json::Map::new();
        if let Some(title) = page.title {
            metadata.insert(TITLE.into(), title.into());
        }
        let language = page.language.or_else(|| {
            answer
                .header(CONTENT_LANGUAGE)
                .and_then(|l| l.split(',').next().map(|l| l.trim().to_owned()))
                .filter(|l| !l.is_empty() && l.len() <= 35)
        });
        if let Some(language) = language {
            metadata.insert(LANGUAGE.into(), language.into());
        }
        let validators = answer.validators();
        let modified = validators
            .last_modified
            .as_deref()
            .and_then(|m| DateTime::parse_from_rfc2822(m).ok())
            .map(|m| m.with_timezone(&Utc))
            .or_else(|| lastmod.and_then(parse_lastmod));
        if let Some(modified) = modified {
            metadata.insert(
                MODIFIED_AT.into(),
                modified.to_rfc3339_opts(SecondsFormat::AutoSi, true).into(),
            );
        }
        let links = page
            .links
            .iter()
            .filter(|link| self.in_scope(link))
            .take(self.max_pages)
            .map(|link| link.as_str().to_owned())
            .collect();
        PageState {
            etag: validators.etag,
            last_modified: validators.last_modified,
            lastmod: lastmod.map(str::to_owned),
            sha256: hex::encode(Sha256::digest(&answer.body)),
            size: answer.body.len() as u64,
            name: file_name(&answer.url, html, &content_type),
            metadata,
            links,
        }
    }

    /// Records what a visit of `url` came to as an item (when the patterns take it); the
    /// links to follow from it, `None` when it is gone or not the site's.
    async fn take(
        &self,
        listing: &mut Listing,
        url: &Url,
        visit: Visit,
        previous: Option<(String, PageState)>,
        listed: bool,
    ) -> Result<Option<Vec<String>>, SyncError> {
        let previous_links = || previous.as_ref().map(|(_, s)| s.links.clone());
        match visit {
            Visit::Fetched(at, state, body) => {
                let id = at.as_str().to_owned();
                if !listing.ids.insert(id.clone()) {
                    // Reached again through a redirect: listed once.
                    return Ok(None);
                }
                let links = state.links.clone();
                if listed && self.patterns.takes(&id) {
                    let path = self.spool(listing.items.len(), &body).await?;
                    self.body(&id, Body::File(path));
                    listing.items.push(item(id, &state, state.fingerprint()));
                }
                Ok(Some(links))
            }
            Visit::Unchanged => {
                let (fingerprint, state) = previous.expect("unchanged only with a previous state");
                let id = url.as_str().to_owned();
                if listing.ids.insert(id.clone()) && listed {
                    listing.items.push(item(id, &state, fingerprint));
                }
                Ok(Some(state.links))
            }
            Visit::Failed(why) => {
                let id = url.as_str().to_owned();
                if listing.ids.insert(id.clone()) && listed {
                    self.body(&id, Body::Failed(why));
                    let mut failed = item(id, &PageState::default(), "failed".into());
                    failed.name = String::new();
                    listing.items.push(failed);
                }
                // What it linked to last time is still the site's as far as we know.
                Ok(previous_links())
            }
            Visit::Gone => Ok(None),
            Visit::Skipped(why) => {
                tracing::debug!(%url, why, "a web page is skipped");
                Ok(None)
            }
        }
    }

    fn body(&self, id: &str, body: Body) {
        self.bodies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned(), body);
    }

    /// Writes a fetched body to this run's spool directory (pages wait there between the
    /// listing and their upload, not in memory).
    async fn spool(&self, n: usize, body: &[u8]) -> Result<PathBuf, SyncError> {
        let dir = {
            let mut spool = self
                .spool
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if spool.is_none() {
                let mut builder = tempfile::Builder::new();
                builder.prefix("web-");
                let made = match &self.spool_in {
                    Some(dir) => builder.tempdir_in(dir),
                    None => builder.tempdir(),
                };
                *spool = Some(made.map_err(|e| {
                    SyncError::Origin(format!("could not make a spool directory: {e}"))
                })?);
            }
            spool
                .as_ref()
                .map(|d| d.path().to_owned())
                .unwrap_or_default()
        };
        let path = dir.join(format!("{n}.page"));
        tokio::fs::write(&path, body)
            .await
            .map_err(|e| SyncError::Origin(format!("could not spool a page: {e}")))?;
        Ok(path)
    }

    /// Pages by links from the start page, breadth first.
    async fn crawl(
        &self,
        previous: &HashMap<String, String>,
        robots: &Robots,
    ) -> Result<Listing, SyncError> {
        let mut listing = Listing::default();
        let mut queue = VecDeque::from([(self.start.clone(), 0_usize)]);
        let mut queued = HashSet::from([self.start.as_str().to_owned()]);
        while let Some((url, depth)) = queue.pop_front() {
            if listing.items.len() >= self.max_pages {
                break;
            }
            let start = depth == 0;
            let takes = self.patterns.takes(url.as_str());
            // An excluded page is not fetched, except the start page, whose links are read.
            if !start && (!takes || robots.refuses(&url).is_some()) {
                continue;
            }
            let known = known(previous, url.as_str()).filter(|_| takes);
            let visit = self
                .visit(&url, known.as_ref().map(|(_, s)| s), None, robots)
                .await;
            if start {
                match &visit {
                    Visit::Gone => {
                        return Err(SyncError::Origin(format!(
                            "the start page {url} is not found"
                        )));
                    }
                    Visit::Failed(why) | Visit::Skipped(why) => {
                        return Err(SyncError::Origin(format!("the start page {url}: {why}")));
                    }
                    Visit::Fetched(..) | Visit::Unchanged => {}
                }
            }
            let links = self.take(&mut listing, &url, visit, known, takes).await?;
            if depth >= self.max_depth {
                continue;
            }
            for link in links.unwrap_or_default() {
                let Ok(link) = Url::parse(&link) else {
                    continue;
                };
                if self.in_scope(&link) && queued.insert(link.as_str().to_owned()) {
                    queue.push_back((link, depth + 1));
                }
            }
        }
        Ok(listing)
    }

    /// The pages the sitemap (and the sitemaps an index names) lists.
    async fn sitemap_listing(
        &self,
        previous: &HashMap<String, String>,
        robots: &Robots,
    ) -> Result<Listing, SyncError> {
        let pages = self.sitemap_pages().await?;
        let mut listing = Listing::default();
        for (url, lastmod) in pages {
            if listing.items.len() >= self.max_pages {
                break;
            }
            if !self.patterns.takes(url.as_str()) || robots.refuses(&url).is_some() {
                continue;
            }
            let known = known(previous, url.as_str());
            let same_lastmod = lastmod.is_some()
                && known
                    .as_ref()
                    .is_some_and(|(_, state)| state.lastmod == lastmod);
            let visit = if same_lastmod {
                // The site says the page has not changed since it was fetched.
                Visit::Unchanged
            } else {
                self.visit(
                    &url,
                    known.as_ref().map(|(_, s)| s),
                    lastmod.as_deref(),
                    robots,
                )
                .await
            };
            self.take(&mut listing, &url, visit, known, true).await?;
        }
        Ok(listing)
    }

    /// Reads the sitemap and any it names; a sitemap that cannot be read fails the run (the
    /// pages it lists would otherwise be taken for gone).
    async fn sitemap_pages(&self) -> Result<Vec<(Url, Option<String>)>, SyncError> {
        let mut queue = VecDeque::from([(self.start.clone(), 0_usize)]);
        let mut read = HashSet::new();
        let mut pages = Vec::new();
        let mut seen = HashSet::new();
        let same_site = |hop: &Url| {
            if hop.origin() == self.start.origin() {
                Ok(())
            } else {
                Err(format!(
                    "a sitemap redirects out of the source's site, to {hop}"
                ))
            }
        };
        while let Some((url, nesting)) = queue.pop_front() {
            if !read.insert(url.as_str().to_owned()) {
                continue;
            }
            if read.len() > MAX_SITEMAPS {
                tracing::warn!(%url, "more than {MAX_SITEMAPS} sitemaps: the rest are not read");
                break;
            }
            let failed = |why: String| SyncError::Origin(format!("the sitemap {url}: {why}"));
            let answer = self
                .fetcher
                .get(&url, None, &same_site)
                .await
                .map_err(|e| failed(e.to_string()))?;
            if !answer.status.is_success() {
                return Err(failed(format!("HTTP {}", answer.status.as_u16())));
            }
            let listed = sitemap::text_of(&answer.body)
                .and_then(|text| sitemap::read(&text))
                .map_err(failed)?;
            for nested in listed.sitemaps {
                match Url::parse(nested.trim()) {
                    Ok(nested) if nesting < MAX_SITEMAP_NESTING && same_site(&nested).is_ok() => {
                        queue.push_back((nested, nesting + 1));
                    }
                    _ => tracing::debug!(nested, "a nested sitemap is not read"),
                }
            }
            for (loc, lastmod) in listed.pages {
                let Ok(mut page) = Url::parse(&loc) else {
                    continue;
                };
                page.set_fragment(None);
                if self.in_scope(&page) && seen.insert(page.as_str().to_owned()) {
                    pages.push((page, lastmod));
                }
            }
        }
        Ok(pages)
    }
}

/// The items of a listing so far, and the external ids taken.
#[derive(Default)]
struct Listing {
    items: Vec<Item>,
    ids: HashSet<String>,
}

/// The previous run's fingerprint and state of the page with external id `id`.
fn known(previous: &HashMap<String, String>, id: &str) -> Option<(String, PageState)> {
    let fingerprint = previous.get(id)?;
    Some((
        fingerprint.clone(),
        PageState::from_fingerprint(fingerprint)?,
    ))
}

fn item(external_id: String, state: &PageState, fingerprint: String) -> Item {
    let modified = state
        .metadata
        .get(MODIFIED_AT)
        .and_then(|m| m.as_str())
        .and_then(|m| DateTime::parse_from_rfc3339(m).ok())
        .map(|m| m.with_timezone(&Utc));
    Item {
        external_id,
        name: state.name.clone(),
        fingerprint,
        size: state.size,
        modified,
        metadata: state.metadata.clone(),
    }
}

/// A sitemap `<lastmod>` (W3C datetime: a date, or a date and time with offset).
fn parse_lastmod(lastmod: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(lastmod)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(lastmod, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
}

/// The file name a page is uploaded as: its last path segment (`index` for a directory),
/// with `.html` for HTML so the parser reads it as a page.
fn file_name(url: &Url, html: bool, content_type: &str) -> String {
    let last = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .map(|s| {
            percent_decode(s)
                .chars()
                .filter(|c| !c.is_control() && *c != '/')
                .collect::<String>()
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "index".to_owned());
    let lower = last.to_ascii_lowercase();
    if html {
        if lower.ends_with(".html") || lower.ends_with(".htm") {
            last
        } else {
            format!("{last}.html")
        }
    } else if !lower.contains('.') {
        match content_type {
            "text/plain" => format!("{last}.txt"),
            "text/markdown" => format!("{last}.md"),
            "application/pdf" => format!("{last}.pdf"),
            _ => last,
        }
    } else {
        last
    }
}

fn percent_decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// Checks a web source's URL against the SSRF guard before the source is made: refused when
/// it names or resolves to an internal address (unless `allow_private`). A name that does
/// not resolve yet is let through: the run will say so.
pub async fn check_target(url: &str, allow_private: bool) -> Result<(), SyncError> {
    let url = check_url(url).map_err(|e| SyncError::Invalid(format!("web url {url:?}: {e}")))?;
    let guard = Guard {
        allow_private,
        setting: ALLOW_PRIVATE_SETTING,
    };
    match guard.resolve(&url).await {
        Ok(_) | Err(TargetError::Resolve { .. } | TargetError::NoAddresses(_)) => Ok(()),
        Err(e) => Err(SyncError::Invalid(format!("web url {}: {e}", url.as_str()))),
    }
}

#[async_trait]
impl Origin for WebOrigin {
    async fn list(&self) -> Result<Vec<Item>, SyncError> {
        self.list_since(&HashMap::new()).await
    }

    async fn list_since(&self, previous: &HashMap<String, String>) -> Result<Vec<Item>, SyncError> {
        let robots = self.robots().await?;
        if let Some(why) = robots.refuses(&self.start) {
            return Err(SyncError::Origin(why));
        }
        let listing = if self.sitemap {
            self.sitemap_listing(previous, &robots).await?
        } else {
            self.crawl(previous, &robots).await?
        };
        let mut items = listing.items;
        items.sort_by(|a, b| a.external_id.cmp(&b.external_id));
        Ok(items)
    }

    async fn open(
        &self,
        item: &Item,
    ) -> Result<BoxStream<'static, Result<Bytes, SyncError>>, SyncError> {
        let body = self
            .bodies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&item.external_id);
        match body {
            Some(Body::File(path)) => {
                let file = tokio::fs::File::open(&path)
                    .await
                    .map_err(|e| SyncError::Origin(format!("the spooled page: {e}")))?;
                Ok(tokio_util::io::ReaderStream::new(file)
                    .map_err(|e| SyncError::Origin(format!("the spooled page: {e}")))
                    .boxed())
            }
            Some(Body::Failed(why)) => Err(SyncError::Origin(why)),
            // Unchanged at the site but wanted again (its document was deleted): fetched whole.
            None => {
                let url = Url::parse(&item.external_id)
                    .ok()
                    .filter(|url| self.in_scope(url))
                    .ok_or_else(|| {
                        SyncError::Origin(format!(
                            "{:?} is not a page of this source's site",
                            item.external_id
                        ))
                    })?;
                let robots = self.robots().await?;
                match self.visit(&url, None, None, &robots).await {
                    Visit::Fetched(_, _, body) => {
                        Ok(futures_util::stream::once(async { Ok(body) }).boxed())
                    }
                    Visit::Gone => Err(SyncError::Origin("HTTP 404: the page is gone".into())),
                    Visit::Unchanged => Err(SyncError::Origin("HTTP 304".into())),
                    Visit::Skipped(why) | Visit::Failed(why) => Err(SyncError::Origin(why)),
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "../web_tests.rs"]
mod tests;
