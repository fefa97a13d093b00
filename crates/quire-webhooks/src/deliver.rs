//! One delivery attempt: check the target, connect to the checked address, POST the
//! signed body, record what happened. Retries and their schedule belong to the caller.

use std::error::Error as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, USER_AGENT};
use url::Host;

use crate::signing;
use crate::target::{self, TargetError};

/// The time a delivery may take, from the target check to the response status.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `user-agent` of every delivery.
pub const USER_AGENT_VALUE: &str = concat!("quire-webhooks/", env!("CARGO_PKG_VERSION"));

/// One message to one endpoint.
#[derive(Clone)]
pub struct Delivery {
    /// The message id, sent as `webhook-id`; the same for every attempt of one event so
    /// receivers can deduplicate.
    pub event_id: String,
    /// The endpoint URL, checked again at delivery time.
    pub url: String,
    /// The endpoint's `whsec_…` secret.
    pub secret: String,
    /// The JSON body, signed exactly as sent.
    pub body: String,
    /// The signing time in unix seconds, sent as `webhook-timestamp`.
    pub timestamp: i64,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("event_id", &self.event_id)
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .field("body_bytes", &self.body.len())
            .field("timestamp", &self.timestamp)
            .finish()
    }
}

/// What one delivery attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The HTTP status, when the endpoint answered at all.
    pub status_code: Option<u16>,
    /// A short reason when the attempt failed ("timed out after 10 s", "HTTP 500", …).
    pub error: Option<String>,
    /// Time from the start of the attempt to the response status (or the failure).
    pub latency: Duration,
    /// Whether the endpoint answered 2xx.
    pub success: bool,
}

/// A client for deliveries: no redirects, no proxies (a proxy would connect to addresses
/// the guard never saw), rustls.
///
/// # Panics
///
/// When the TLS backend cannot be initialised, as `reqwest::Client::new` does; falling
/// back to a default client would silently follow redirects and use proxies.
pub fn client() -> reqwest::Client {
    builder()
        .build()
        .expect("the TLS backend of the webhook client initialises")
}

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(USER_AGENT_VALUE)
}

/// Makes one delivery attempt: checks the target (unless `allow_private`, internal
/// addresses are refused), connects only to the checked addresses, and POSTs the signed
/// body. Never retries; redirects are failures. `client` should come from [`client`]; it
/// serves IP-literal URLs, while host names get a client pinned to the checked addresses.
pub async fn deliver(
    client: &reqwest::Client,
    delivery: &Delivery,
    allow_private: bool,
    timeout: Duration,
) -> Outcome {
    let started = Instant::now();
    let result = tokio::time::timeout(timeout, attempt(client, delivery, allow_private)).await;
    let latency = started.elapsed();
    let outcome = match result {
        Ok(Ok(status)) => Outcome {
            status_code: Some(status),
            error: status_error(status),
            latency,
            success: (200..300).contains(&status),
        },
        Ok(Err(error)) => Outcome {
            status_code: None,
            error: Some(error),
            latency,
            success: false,
        },
        Err(_) => Outcome {
            status_code: None,
            error: Some(format!("timed out after {}", describe(timeout))),
            latency,
            success: false,
        },
    };
    tracing::debug!(
        event_id = %delivery.event_id,
        status = ?outcome.status_code,
        error = ?outcome.error,
        latency_ms = outcome.latency.as_millis() as u64,
        "webhook delivery attempt"
    );
    outcome
}

/// The attempt up to the response status; errors are already the short text for `Outcome`.
async fn attempt(
    client: &reqwest::Client,
    delivery: &Delivery,
    allow_private: bool,
) -> Result<u16, String> {
    let url = target::check_url(&delivery.url).map_err(|error| refused(&error))?;
    let addresses = target::resolve_and_check(&url, allow_private)
        .await
        .map_err(|error| refused(&error))?;
    let headers = signing::headers(
        &delivery.secret,
        &delivery.event_id,
        delivery.timestamp,
        &delivery.body,
    )
    .map_err(|error| error.to_string())?;

    let pinned;
    let client = match pinned_client(&url, &addresses) {
        None => client,
        Some(built) => {
            pinned = built.map_err(|error| format!("client setup failed: {error}"))?;
            &pinned
        }
    };
    let mut request = client
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header(USER_AGENT, USER_AGENT_VALUE)
        .body(delivery.body.clone());
    for (name, value) in headers.pairs() {
        request = request.header(name, value);
    }
    let response = request
        .send()
        .await
        .map_err(|error| describe_error(&error))?;
    Ok(response.status().as_u16())
}

/// For a host name, a client that resolves it only to the checked addresses, so a second
/// DNS answer (rebinding) cannot redirect the connection. IP literals need none.
fn pinned_client(
    url: &Url,
    addresses: &[SocketAddr],
) -> Option<Result<reqwest::Client, reqwest::Error>> {
    match url.host()? {
        Host::Ipv4(_) | Host::Ipv6(_) => None,
        Host::Domain(domain) => Some(builder().resolve_to_addrs(domain, addresses).build()),
    }
}

fn refused(error: &TargetError) -> String {
    match error {
        TargetError::Resolve { .. } | TargetError::NoAddresses(_) => error.to_string(),
        TargetError::InvalidUrl(_)
        | TargetError::UnsupportedScheme(_)
        | TargetError::MissingHost
        | TargetError::Credentials
        | TargetError::Internal { .. } => format!("refused target: {error}"),
    }
}

fn status_error(status: u16) -> Option<String> {
    match status {
        200..=299 => None,
        300..=399 => Some(format!("HTTP {status} (redirects are not followed)")),
        _ => Some(format!("HTTP {status}")),
    }
}

fn describe_error(error: &reqwest::Error) -> String {
    let io_kind = std::iter::successors(error.source(), |&source| source.source())
        .find_map(|source| source.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    match io_kind {
        Some(std::io::ErrorKind::ConnectionRefused) => "connection refused".to_owned(),
        Some(std::io::ErrorKind::ConnectionReset) => "connection reset".to_owned(),
        _ if error.is_timeout() => "timed out".to_owned(),
        _ if error.is_connect() => format!("connection failed: {}", innermost(error)),
        _ => format!("request failed: {}", innermost(error)),
    }
}

/// The root cause's text: reqwest's own message is only "error sending request".
fn innermost(error: &reqwest::Error) -> String {
    std::iter::successors(error.source(), |&source| source.source())
        .last()
        .map_or_else(|| error.to_string(), ToString::to_string)
}

fn describe(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn host_names_connect_only_to_the_pinned_addresses() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let pinned_to = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await.unwrap();
            stream
                .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
        });
        // `.invalid` never resolves (RFC 6761): only the pinned address can answer.
        let url = Url::parse(&format!("http://target.invalid:{}/", pinned_to.port())).unwrap();

        let client = pinned_client(&url, &[pinned_to]).unwrap().unwrap();
        let response = client.post(url).send().await.unwrap();

        assert_eq!(response.status().as_u16(), 204);
        let literal = Url::parse("http://127.0.0.1:1/").unwrap();
        assert!(pinned_client(&literal, &[pinned_to]).is_none());
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(describe(Duration::from_secs(10)), "10 s");
        assert_eq!(describe(Duration::from_millis(300)), "300 ms");
        assert_eq!(describe(Duration::from_millis(1500)), "1500 ms");
    }

    #[test]
    fn statuses_are_classified() {
        assert_eq!(status_error(204), None);
        assert_eq!(
            status_error(302).as_deref(),
            Some("HTTP 302 (redirects are not followed)")
        );
        assert_eq!(status_error(500).as_deref(), Some("HTTP 500"));
    }

    #[test]
    fn debug_redacts_the_secret() {
        let delivery = Delivery {
            event_id: "msg_1".into(),
            url: "https://example.com/".into(),
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            body: "{}".into(),
            timestamp: 1,
        };
        assert!(!format!("{delivery:?}").contains("MfKQ9r8"));
    }
}
