//! Deliveries to a real axum receiver on 127.0.0.1 that checks every signature with the
//! independent verifier.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use quire_webhooks::{DEFAULT_TIMEOUT, Delivery, client, deliver};

use crate::verifier;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: HeaderMap,
    body: Bytes,
    verified: bool,
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Received>>>);

impl Log {
    fn all(&self) -> Vec<Received> {
        self.0.lock().unwrap().clone()
    }
}

struct Receiver {
    address: SocketAddr,
    log: Log,
}

impl Receiver {
    async fn start() -> Self {
        let log = Log::default();
        let app = Router::new()
            .route("/hook", post(ok))
            .route("/fail", post(fail))
            .route("/slow", post(slow))
            .route("/redirect", post(redirect))
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { address, log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn record(log: &Log, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> bool {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    };
    let verified = verifier::verify(
        SECRET,
        value("webhook-id"),
        value("webhook-timestamp"),
        value("webhook-signature"),
        body,
        now(),
    )
    .is_ok();
    log.0.lock().unwrap().push(Received {
        path: uri.path().to_owned(),
        headers: headers.clone(),
        body: body.clone(),
        verified,
    });
    verified
}

async fn ok(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    if record(&log, &uri, &headers, &body) {
        StatusCode::OK
    } else {
        StatusCode::UNAUTHORIZED
    }
}

async fn fail(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    record(&log, &uri, &headers, &body);
    StatusCode::INTERNAL_SERVER_ERROR
}

async fn slow(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    record(&log, &uri, &headers, &body);
    tokio::time::sleep(Duration::from_secs(5)).await;
    StatusCode::OK
}

async fn redirect(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    record(&log, &uri, &headers, &body);
    (StatusCode::FOUND, [(header::LOCATION, "/hook")]).into_response()
}

fn delivery(url: String) -> Delivery {
    Delivery {
        event_id: "msg_2c5Yd0Tq9wR1".to_owned(),
        url,
        secret: SECRET.to_owned(),
        body: r#"{"type":"document.indexed","data":{"id":"doc_1"}}"#.to_owned(),
        timestamp: now(),
    }
}

#[tokio::test]
async fn delivers_a_signed_body_the_receiver_verifies() {
    let receiver = Receiver::start().await;
    let delivery = delivery(receiver.url("/hook"));

    let outcome = deliver(&client(), &delivery, true, DEFAULT_TIMEOUT).await;

    assert_eq!(outcome.status_code, Some(200), "{outcome:?}");
    assert_eq!(outcome.error, None);
    assert!(outcome.success);
    let received = receiver.log.all();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert!(request.verified, "{request:?}");
    assert_eq!(request.body, delivery.body.as_bytes());
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers["webhook-id"], delivery.event_id.as_str());
    assert_eq!(
        request.headers["webhook-timestamp"],
        delivery.timestamp.to_string().as_str()
    );
    assert_eq!(
        request.headers["user-agent"],
        concat!("quire-webhooks/", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn delivers_by_host_name_through_the_checked_addresses() {
    let receiver = Receiver::start().await;
    let url = format!("http://localhost:{}/hook", receiver.address.port());

    let outcome = deliver(&client(), &delivery(url), true, DEFAULT_TIMEOUT).await;

    assert_eq!(outcome.status_code, Some(200), "{outcome:?}");
    assert!(outcome.success);
    assert_eq!(receiver.log.all().len(), 1);
    assert!(receiver.log.all()[0].verified);
}

#[tokio::test]
async fn internal_targets_are_refused_before_any_request() {
    let receiver = Receiver::start().await;

    for url in [
        receiver.url("/hook"),
        format!("http://localhost:{}/hook", receiver.address.port()),
    ] {
        let outcome = deliver(&client(), &delivery(url), false, DEFAULT_TIMEOUT).await;
        assert!(!outcome.success);
        assert_eq!(outcome.status_code, None);
        let error = outcome.error.unwrap();
        assert!(error.starts_with("refused target: "), "{error}");
        assert!(error.contains("a loopback address"), "{error}");
        assert!(error.contains("webhooks.allow_private_targets"), "{error}");
    }
    assert!(receiver.log.all().is_empty());
}

#[tokio::test]
async fn a_server_error_is_a_failure_with_its_status() {
    let receiver = Receiver::start().await;

    let outcome = deliver(
        &client(),
        &delivery(receiver.url("/fail")),
        true,
        DEFAULT_TIMEOUT,
    )
    .await;

    assert!(!outcome.success);
    assert_eq!(outcome.status_code, Some(500));
    assert_eq!(outcome.error.as_deref(), Some("HTTP 500"));
    assert_eq!(receiver.log.all().len(), 1, "never retried");
}

#[tokio::test]
async fn a_slow_receiver_times_out() {
    let receiver = Receiver::start().await;
    let started = Instant::now();

    let outcome = deliver(
        &client(),
        &delivery(receiver.url("/slow")),
        true,
        Duration::from_millis(300),
    )
    .await;

    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(!outcome.success);
    assert_eq!(outcome.status_code, None);
    assert_eq!(outcome.error.as_deref(), Some("timed out after 300 ms"));
    assert!(outcome.latency >= Duration::from_millis(300));
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let receiver = Receiver::start().await;

    let outcome = deliver(
        &client(),
        &delivery(receiver.url("/redirect")),
        true,
        DEFAULT_TIMEOUT,
    )
    .await;

    assert!(!outcome.success);
    assert_eq!(outcome.status_code, Some(302));
    assert_eq!(
        outcome.error.as_deref(),
        Some("HTTP 302 (redirects are not followed)")
    );
    let paths: Vec<String> = receiver.log.all().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/redirect"]);
}

#[tokio::test]
async fn a_closed_port_is_connection_refused() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);

    let outcome = deliver(
        &client(),
        &delivery(format!("http://{address}/hook")),
        true,
        DEFAULT_TIMEOUT,
    )
    .await;

    assert!(!outcome.success);
    assert_eq!(outcome.status_code, None);
    assert_eq!(outcome.error.as_deref(), Some("connection refused"));
}

#[tokio::test]
async fn unusable_urls_and_secrets_fail_without_a_request() {
    let outcome = deliver(
        &client(),
        &delivery("ftp://x/".to_owned()),
        true,
        DEFAULT_TIMEOUT,
    )
    .await;
    assert_eq!(
        outcome.error.as_deref(),
        Some("refused target: unsupported scheme `ftp`: targets must be http or https")
    );

    let receiver = Receiver::start().await;
    let mut bad_secret = delivery(receiver.url("/hook"));
    bad_secret.secret = "whsec_***".to_owned();
    let outcome = deliver(&client(), &bad_secret, true, DEFAULT_TIMEOUT).await;
    assert!(!outcome.success);
    assert_eq!(
        outcome.error.as_deref(),
        Some("webhook secret is not valid base64 after the `whsec_` prefix")
    );
    assert!(receiver.log.all().is_empty());
}
