//! The web origin's only way out: one GET at a time per host, every hop's address checked by
//! the SSRF guard and the connection pinned to the checked addresses, redirects followed by
//! hand, `Retry-After` honoured, the body capped.

use std::collections::HashMap;
use std::error::Error as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use quire_netguard::{Guard, TargetError, Url, check_url};
use reqwest::StatusCode;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{
    CONTENT_LENGTH, ETAG, HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, LOCATION,
    RETRY_AFTER,
};

/// The `User-Agent` of every request a web source makes.
pub const USER_AGENT: &str = concat!("Quire/", env!("CARGO_PKG_VERSION"), " (+sync)");
/// Longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest one request may take, its body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed from one URL (RFC 9309 asks at least five for robots.txt).
const MAX_REDIRECTS: usize = 5;
/// Times a 429 or 503 is tried again after the wait its `Retry-After` asks.
const MAX_RETRIES: usize = 2;
/// Longest `Retry-After` waited out; a server asking more fails the request.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// Validators from an earlier answer, sent so an unchanged page costs a 304.
#[derive(Debug, Clone, Default)]
pub struct Validators {
    /// The `ETag` it had.
    pub etag: Option<String>,
    /// The `Last-Modified` it had.
    pub last_modified: Option<String>,
}

/// A final answer (after redirects and retries).
#[derive(Debug)]
pub struct Answer {
    /// The URL that answered (the last hop), without fragment.
    pub url: Url,
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body (empty unless 2xx).
    pub body: Bytes,
}

impl Answer {
    /// The first value of header `name`, when it is text.
    pub fn header(&self, name: reqwest::header::HeaderName) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The validators to send next time.
    pub fn validators(&self) -> Validators {
        Validators {
            etag: self.header(ETAG),
            last_modified: self.header(LAST_MODIFIED),
        }
    }
}

/// Why a fetch did not come to an answer.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The guard refused a hop (an internal address, a bad scheme).
    #[error("refused target {url}: {source}")]
    Refused {
        /// The refused hop.
        url: String,
        /// The guard's reason.
        source: TargetError,
    },
    /// A hop was outside what the caller takes (another site, disallowed by robots.txt).
    #[error("{0}")]
    Skipped(String),
    /// The request failed (unreachable, timed out, too large, too many redirects).
    #[error("{0}")]
    Failed(String),
}

/// Host names to the addresses the guard checked for them: the client's only resolver, so a
/// connection goes nowhere the guard did not see (no second DNS answer, no rebinding).
#[derive(Debug, Default)]
struct Pins(Mutex<HashMap<String, Vec<SocketAddr>>>);

impl Pins {
    fn set(&self, host: &str, addresses: Vec<SocketAddr>) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(host.to_ascii_lowercase(), addresses);
    }
}

struct PinnedResolver(Arc<Pins>);

impl Resolve for PinnedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let found = (self.0)
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&name.as_str().to_ascii_lowercase())
            .cloned();
        Box::pin(async move {
            match found {
                Some(addresses) => Ok(Box::new(addresses.into_iter()) as Addrs),
                None => Err("the host was not checked by the SSRF guard".into()),
            }
        })
    }
}

/// Fetches for one run of one web source, one request at a time.
pub struct Fetcher {
    client: reqwest::Client,
    pins: Arc<Pins>,
    guard: Guard,
    max_bytes: u64,
    /// The unit tests' site, on a loopback address, let through while every other internal
    /// address stays refused: how they prove a redirect to loopback is refused. Not in builds.
    #[cfg(test)]
    pub(crate) test_site: Option<SocketAddr>,
}

impl Fetcher {
    /// A fetcher that lets through what `guard` allows and bodies up to `max_bytes`.
    pub fn new(guard: Guard, max_bytes: u64) -> Result<Self, String> {
        let pins = Arc::new(Pins::default());
        let client = reqwest::Client::builder()
            // Each hop must be checked before it is connected to: redirects are ours.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would connect to addresses the guard never saw.
            .no_proxy()
            .dns_resolver(PinnedResolver(Arc::clone(&pins)))
            .user_agent(USER_AGENT)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| format!("could not build the web client: {e}"))?;
        Ok(Self {
            client,
            pins,
            guard,
            max_bytes,
            #[cfg(test)]
            test_site: None,
        })
    }

    /// GETs `url`, following redirects (each hop checked by the guard and by `hop`, which
    /// may skip it), sending `validators` when given, waiting out a bounded `Retry-After` on
    /// 429 and 503. A body over the limit is a failure.
    pub async fn get(
        &self,
        url: &Url,
        validators: Option<&Validators>,
        hop: &(dyn Fn(&Url) -> Result<(), String> + Sync),
    ) -> Result<Answer, FetchError> {
        let mut retries = 0;
        loop {
            let answer = self.follow(url, validators, hop).await?;
            if !matches!(
                answer.status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            ) {
                return Ok(answer);
            }
            let Some(wait) = retry_after(&answer.headers) else {
                return Ok(answer);
            };
            if retries == MAX_RETRIES || wait > MAX_RETRY_WAIT {
                return Err(FetchError::Failed(format!(
                    "HTTP {} (Retry-After {} s{})",
                    answer.status.as_u16(),
                    wait.as_secs(),
                    if retries == MAX_RETRIES {
                        ", still after retrying"
                    } else {
                        ", longer than a sync waits"
                    }
                )));
            }
            retries += 1;
            tracing::debug!(%url, wait_s = wait.as_secs(), "Retry-After: waiting");
            tokio::time::sleep(wait).await;
        }
    }

    async fn follow(
        &self,
        start: &Url,
        validators: Option<&Validators>,
        hop: &(dyn Fn(&Url) -> Result<(), String> + Sync),
    ) -> Result<Answer, FetchError> {
        let mut url = start.clone();
        for _ in 0..=MAX_REDIRECTS {
            // The guard first, so a refused address is reported as such whatever else is
            // wrong with the hop.
            self.pin(&url).await?;
            hop(&url).map_err(FetchError::Skipped)?;
            let mut request = self.client.get(url.clone());
            if let Some(validators) = validators {
                if let Some(etag) = &validators.etag {
                    request = request.header(IF_NONE_MATCH, etag);
                }
                if let Some(modified) = &validators.last_modified {
                    request = request.header(IF_MODIFIED_SINCE, modified);
                }
            }
            // Held until the body is read: one request at a time per host on this node.
            let _turn = super::hosts::turn(&url).await;
            let response = request
                .send()
                .await
                .map_err(|e| FetchError::Failed(describe(&e)))?;
            let status = response.status();
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| {
                        FetchError::Failed(format!("HTTP {} without a Location", status.as_u16()))
                    })?;
                let mut next = url.join(location).map_err(|e| {
                    FetchError::Failed(format!("a redirect to a bad URL {location:?}: {e}"))
                })?;
                next.set_fragment(None);
                url = next;
                continue;
            }
            let headers = response.headers().clone();
            let body = if status.is_success() {
                self.body(response).await?
            } else {
                Bytes::new()
            };
            return Ok(Answer {
                url,
                status,
                headers,
                body,
            });
        }
        Err(FetchError::Failed(format!(
            "more than {MAX_REDIRECTS} redirects from {start}"
        )))
    }

    /// Checks `url` with the guard and pins its host to the checked addresses.
    async fn pin(&self, url: &Url) -> Result<(), FetchError> {
        let refused = |source| FetchError::Refused {
            url: url.to_string(),
            source,
        };
        let url = check_url(url.as_str()).map_err(refused)?;
        #[cfg(test)]
        if self.test_site.is_some() && self.test_site == literal(&url) {
            return Ok(());
        }
        let addresses = self.guard.resolve(&url).await.map_err(refused)?;
        if let Some(url::Host::Domain(host)) = url.host() {
            self.pins.set(host, addresses);
        }
        Ok(())
    }

    async fn body(&self, mut response: reqwest::Response) -> Result<Bytes, FetchError> {
        let too_large = || {
            FetchError::Failed(format!(
                "larger than the upload limit of {} bytes",
                self.max_bytes
            ))
        };
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_bytes) {
            return Err(too_large());
        }
        let mut body = BytesMut::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| FetchError::Failed(describe(&e)))?
        {
            if (body.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }
}

#[cfg(test)]
fn literal(url: &Url) -> Option<SocketAddr> {
    let port = url.port_or_known_default()?;
    match url.host()? {
        url::Host::Ipv4(ip) => Some(SocketAddr::new(ip.into(), port)),
        url::Host::Ipv6(ip) => Some(SocketAddr::new(ip.into(), port)),
        url::Host::Domain(_) => None,
    }
}

/// The wait a `Retry-After` asks for: delta-seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// A transport error as a short reason ("connection refused", "timed out", …).
fn describe(error: &reqwest::Error) -> String {
    let io_kind = std::iter::successors(error.source(), |&source| source.source())
        .find_map(|source| source.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    let innermost = std::iter::successors(error.source(), |&source| source.source())
        .last()
        .map_or_else(|| error.to_string(), ToString::to_string);
    match io_kind {
        Some(std::io::ErrorKind::ConnectionRefused) => "connection refused".to_owned(),
        Some(std::io::ErrorKind::ConnectionReset) => "connection reset".to_owned(),
        _ if error.is_timeout() => format!("timed out after {} s", REQUEST_TIMEOUT.as_secs()),
        _ => format!("request failed: {innermost}"),
    }
}
