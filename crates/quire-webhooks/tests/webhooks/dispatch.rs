//! The dispatcher over a real SQLite store and a receiver on 127.0.0.1: an event whose
//! dispatcher died mid-delivery is sent again, with the same `webhook-id`, once its claim has
//! run out; a graceful stop waits for the deliveries in flight and logs them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use chrono::{DateTime, Utc};
use quire_core::{
    DocumentId, ManualClock, NewDocument, NewSource, SourceDescription, SourceId, SourceName,
    SourceScope, SourceType, WebhookEvent, WebhookId,
};
use quire_store::{NewWebhook, Store, StoreLocation};
use quire_webhooks::{DispatchSettings, Dispatcher, new_secret};

/// The `webhook-id` of every request, as it arrived (before any answer).
#[derive(Clone, Default)]
struct Seen {
    ids: Arc<Mutex<Vec<String>>>,
    /// `/hang-once` has hung once already.
    hung: Arc<AtomicBool>,
}

impl Seen {
    fn ids(&self) -> Vec<String> {
        self.ids.lock().unwrap().clone()
    }

    fn note(&self, headers: &HeaderMap) {
        let id = headers
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        self.ids.lock().unwrap().push(id.to_owned());
    }
}

/// Never answers the first request (the dispatcher dies meanwhile); answers the others.
async fn hang_once(State(seen): State<Seen>, headers: HeaderMap) -> StatusCode {
    seen.note(&headers);
    if !seen.hung.swap(true, Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    StatusCode::NO_CONTENT
}

/// Answers after a second.
async fn slow(State(seen): State<Seen>, headers: HeaderMap) -> StatusCode {
    seen.note(&headers);
    tokio::time::sleep(Duration::from_secs(1)).await;
    StatusCode::NO_CONTENT
}

/// Answers long after any timeout the tests set.
async fn hang(State(seen): State<Seen>, headers: HeaderMap) -> StatusCode {
    seen.note(&headers);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    StatusCode::NO_CONTENT
}

/// Starts the receiver; returns what it saw and its base URL.
async fn receiver() -> (Seen, String) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/hang-once", post(hang_once))
        .route("/slow", post(slow))
        .route("/hang", post(hang))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (seen, format!("http://{address}"))
}

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-05-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// A store with one document, and the webhooks at `urls` subscribed to
/// `document.pii_detected`.
async fn store_with_hooks(
    dir: &tempfile::TempDir,
    urls: &[String],
) -> (Arc<dyn Store>, DocumentId, Vec<WebhookId>) {
    let store = quire_store::open(&StoreLocation::Sqlite(dir.path().join("quire.db")))
        .await
        .unwrap();
    let source = store
        .create_source(NewSource {
            id: SourceId::new(),
            name: SourceName::parse("S").unwrap(),
            description: SourceDescription::default(),
            source_type: SourceType::Network,
            created_at: t0(),
        })
        .await
        .unwrap()
        .id;
    let doc = DocumentId::new();
    store
        .create_document(NewDocument {
            id: doc,
            source_id: source,
            name: "cv.txt".into(),
            content_type: "text/plain".into(),
            size: 3,
            sha256: "ab".repeat(32),
            metadata: Default::default(),
            external_id: None,
            created_at: t0(),
        })
        .await
        .unwrap();
    let mut hooks = Vec::new();
    for url in urls {
        let hook = store
            .create_webhook(NewWebhook {
                id: WebhookId::new(),
                url: url.clone(),
                events: vec![WebhookEvent::DocumentPiiDetected],
                secret: new_secret().unwrap(),
                scope: SourceScope::All,
                created_at: t0(),
            })
            .await
            .unwrap();
        hooks.push(hook.id);
    }
    (store, doc, hooks)
}

async fn announce(store: &dyn Store, doc: DocumentId) {
    store
        .enqueue_event(
            doc,
            WebhookEvent::DocumentPiiDetected,
            serde_json::json!({"piiTypes": ["email"]}),
            t0(),
        )
        .await
        .unwrap();
}

fn settings(timeout: Duration) -> DispatchSettings {
    DispatchSettings {
        allow_private_targets: true,
        timeout,
        concurrency: 4,
        poll_interval: Duration::from_millis(20),
        node: "test-node".into(),
    }
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_event_whose_dispatcher_died_mid_delivery_is_sent_again_with_the_same_id() {
    let (seen, base) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let (store, doc, hooks) = store_with_hooks(&dir, &[format!("{base}/hang-once")]).await;
    announce(&*store, doc).await;
    let clock = Arc::new(ManualClock::new(t0()));
    let settings = settings(Duration::from_secs(10));

    let crashing = Dispatcher::new(Arc::clone(&store), clock.clone(), settings.clone()).start();
    wait_until("the first attempt", async || seen.ids().len() == 1).await;
    // Dies mid-request: nothing is logged, the row stays claimed.
    drop(crashing);
    assert!(store.deliveries(hooks[0], 10).await.unwrap().is_empty());
    assert_eq!(store.pending_deliveries_count(t0()).await.unwrap(), 0);

    // The claim holds for its length, then the next dispatcher takes the event.
    let length = chrono::Duration::from_std(settings.claim_length()).unwrap();
    assert_eq!(length, chrono::Duration::seconds(50), "2 × 10 s + 30 s");
    clock.advance(length);
    assert_eq!(
        store.pending_deliveries_count(t0() + length).await.unwrap(),
        0
    );
    clock.advance(chrono::Duration::seconds(1));
    let next = Dispatcher::new(Arc::clone(&store), clock.clone(), settings).start();
    wait_until("the attempt logged", async || {
        !store.deliveries(hooks[0], 10).await.unwrap().is_empty()
    })
    .await;
    next.shutdown().await;

    let ids = seen.ids();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the same webhook-id both times");
    let log = store.deliveries(hooks[0], 10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].event_id.to_string(), ids[0]);
    assert_eq!(log[0].status_code, Some(204));
    let much_later = t0() + chrono::Duration::days(1);
    assert_eq!(store.pending_deliveries_count(much_later).await.unwrap(), 0);
}

#[tokio::test]
async fn a_graceful_stop_waits_for_deliveries_in_flight_and_logs_them() {
    let (seen, base) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let (store, doc, hooks) =
        store_with_hooks(&dir, &[format!("{base}/slow"), format!("{base}/hang")]).await;
    announce(&*store, doc).await;
    let clock = Arc::new(ManualClock::new(t0()));

    let dispatcher =
        Dispatcher::new(Arc::clone(&store), clock, settings(Duration::from_secs(2))).start();
    wait_until("both requests sent", async || seen.ids().len() == 2).await;
    let stopping = Instant::now();
    dispatcher.shutdown().await;
    let waited = stopping.elapsed();
    // The hanging receiver is cut off at the 2 s timeout, not at the 5 s logging grace.
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(5),
        "{waited:?}"
    );

    let slow = store.deliveries(hooks[0], 10).await.unwrap();
    assert_eq!(slow.len(), 1, "the slow answer was waited for");
    assert_eq!(slow[0].status_code, Some(204));
    let hung = store.deliveries(hooks[1], 10).await.unwrap();
    assert_eq!(hung.len(), 1, "the timeout was logged");
    assert!(
        hung[0].error.as_deref().unwrap().contains("timed out"),
        "{hung:?}"
    );
    let much_later = t0() + chrono::Duration::days(1);
    assert_eq!(
        store.pending_deliveries_count(much_later).await.unwrap(),
        0,
        "nothing left to attempt again"
    );
}
