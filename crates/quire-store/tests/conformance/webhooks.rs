//! The webhook stories: registration, the outbox written with each document status change,
//! claims that are leases (one claimer at a time; a claim that runs out hands the same event
//! out again; a logged attempt never comes back), and the bounded delivery log.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use quire_core::{DocumentId, EventId, SourceId, SourceScope, WebhookEvent, WebhookId};
use quire_store::{
    NewDeliveryAttempt, NewWebhook, PendingDelivery, Store, StoreError, WebhookRecord,
};
use serde_json::{Value, json};

use crate::fixtures::{chunks, document, source, t0};
use crate::harness::TestDb;

use WebhookEvent::{DocumentFailed, DocumentPiiDetected, DocumentReady};

async fn webhook(store: &dyn Store, url: &str, events: &[WebhookEvent]) -> WebhookRecord {
    scoped_webhook(store, url, events, SourceScope::All).await
}

async fn scoped_webhook(
    store: &dyn Store,
    url: &str,
    events: &[WebhookEvent],
    scope: SourceScope,
) -> WebhookRecord {
    store
        .create_webhook(NewWebhook {
            id: WebhookId::new(),
            url: url.into(),
            events: events.to_vec(),
            secret: format!("whsec-{url}"),
            scope,
            created_at: t0(),
        })
        .await
        .unwrap()
}

/// Claims the next queued job and finishes it with `n` chunks at `at`.
async fn finish_next(store: &dyn Store, expected: DocumentId, n: u32, at: DateTime<Utc>) {
    let job = store
        .claim_job("w", at, at + Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, expected);
    store.finish_document(&job, chunks(n), at).await.unwrap();
}

/// Claims up to `limit` deliveries for `claimer` at `at`, for one minute.
async fn claim_at(
    store: &dyn Store,
    claimer: &str,
    at: DateTime<Utc>,
    limit: u32,
) -> Vec<PendingDelivery> {
    store
        .claim_deliveries(claimer, at, at + Duration::minutes(1), limit)
        .await
        .unwrap()
}

/// [`claim_at`] at [`t0`] for a dispatcher "d".
async fn claim(store: &dyn Store, limit: u32) -> Vec<PendingDelivery> {
    claim_at(store, "d", t0(), limit).await
}

/// The attempt a dispatcher logs for `delivery`.
fn attempted(delivery: &PendingDelivery, at: DateTime<Utc>) -> NewDeliveryAttempt {
    NewDeliveryAttempt {
        event_id: delivery.event_id,
        webhook_id: delivery.webhook.id,
        event: delivery.event,
        attempted_at: at,
        status_code: Some(204),
        error: None,
        latency_ms: 3,
    }
}

fn body(delivery: &PendingDelivery) -> Value {
    serde_json::from_str(&delivery.body).unwrap()
}

fn document_of(delivery: &PendingDelivery) -> String {
    body(delivery)["data"]["documentId"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn attempt(webhook_id: WebhookId, i: i64) -> NewDeliveryAttempt {
    NewDeliveryAttempt {
        event_id: EventId::new(),
        webhook_id,
        event: DocumentReady,
        attempted_at: t0() + Duration::seconds(i),
        status_code: (i % 2 == 0).then_some(200),
        error: (i % 2 == 1).then(|| format!("timeout {i}")),
        latency_ms: u64::try_from(i).unwrap(),
    }
}

pub(super) async fn webhooks_are_registered_listed_and_deleted(store: &dyn Store) {
    assert!(store.list_webhooks().await.unwrap().is_empty());
    let first = webhook(
        store,
        "https://a.example/hook",
        &[DocumentFailed, DocumentReady],
    )
    .await;
    assert_eq!(first.events, [DocumentFailed, DocumentReady], "order kept");
    assert_eq!(first.secret, "whsec-https://a.example/hook");
    let second = webhook(
        store,
        "https://b.example/hook",
        &[DocumentReady, DocumentReady],
    )
    .await;
    assert_eq!(second.events, [DocumentReady], "repeats stored once");

    assert_eq!(
        store.get_webhook(first.id).await.unwrap(),
        Some(first.clone())
    );
    assert!(store.get_webhook(WebhookId::new()).await.unwrap().is_none());
    assert_eq!(
        store.list_webhooks().await.unwrap(),
        [first.clone(), second.clone()]
    );
    assert!(
        !format!("{first:?}").contains("whsec"),
        "Debug leaves the secret out"
    );

    let none = store
        .create_webhook(NewWebhook {
            id: WebhookId::new(),
            url: "https://c.example/hook".into(),
            events: Vec::new(),
            secret: "s".into(),
            scope: SourceScope::All,
            created_at: t0(),
        })
        .await;
    assert!(matches!(none, Err(StoreError::Invalid(_))), "{none:?}");

    assert!(store.delete_webhook(first.id).await.unwrap());
    assert!(
        !store.delete_webhook(first.id).await.unwrap(),
        "already gone"
    );
    assert!(store.get_webhook(first.id).await.unwrap().is_none());
    assert_eq!(store.list_webhooks().await.unwrap(), [second]);
}

pub(super) async fn finishing_a_document_writes_one_event_per_subscriber(store: &dyn Store) {
    let s = source(store, "Manuals").await;
    // Without webhooks nothing is written.
    let quiet = document(store, s, "quiet.txt").await;
    finish_next(store, quiet, 1, t0()).await;
    assert_eq!(store.pending_deliveries_count(t0()).await.unwrap(), 0);

    let ready = webhook(store, "https://ready.example", &[DocumentReady]).await;
    let both = webhook(
        store,
        "https://both.example",
        &[DocumentFailed, DocumentReady],
    )
    .await;
    let failed = webhook(store, "https://failed.example", &[DocumentFailed]).await;
    let pii = webhook(store, "https://pii.example", &[DocumentPiiDetected]).await;

    let doc = document(store, s, "guide.pdf").await;
    let at = t0() + Duration::milliseconds(90_250);
    finish_next(store, doc, 3, at).await;
    assert_eq!(store.pending_deliveries_count(t0()).await.unwrap(), 2);

    let claimed = claim(store, 10).await;
    let hooks: HashSet<WebhookId> = claimed.iter().map(|d| d.webhook.id).collect();
    assert_eq!(hooks, HashSet::from([ready.id, both.id]));
    assert!(!hooks.contains(&failed.id) && !hooks.contains(&pii.id));
    assert_ne!(
        claimed[0].event_id, claimed[1].event_id,
        "one event id per webhook"
    );
    for delivery in &claimed {
        let expected = if delivery.webhook.id == ready.id {
            &ready
        } else {
            &both
        };
        assert_eq!(&delivery.webhook, expected, "the webhook with its secret");
        assert_eq!((delivery.event, delivery.created_at), (DocumentReady, at));
        assert_eq!(
            body(delivery),
            json!({
                "event": "document.ready",
                "timestamp": "2026-05-01T12:01:30.250Z",
                "data": {
                    "documentId": doc.to_string(),
                    "documentName": "guide.pdf",
                    "dataSourceId": s.to_string(),
                    "dataSourceName": "Manuals",
                    "chunkCount": 3,
                    "version": 1,
                }
            })
        );
    }
    assert_eq!(store.pending_deliveries_count(t0()).await.unwrap(), 0);
}

/// A webhook limited to some sources gets events of those sources only; its scope is stored
/// and read back with it, also when a dispatcher claims its events.
pub(super) async fn a_scoped_webhook_gets_only_its_sources_events(store: &dyn Store) {
    let (a, b) = (source(store, "A").await, source(store, "B").await);
    let everywhere = webhook(store, "https://all.example", &[DocumentReady]).await;
    let only_a = scoped_webhook(
        store,
        "https://a.example",
        &[DocumentReady],
        SourceScope::only([a]),
    )
    .await;
    let a_and_b = scoped_webhook(
        store,
        "https://ab.example",
        &[DocumentReady],
        SourceScope::only([a, b]),
    )
    .await;
    assert_eq!(only_a.scope, SourceScope::only([a]));
    assert_eq!(
        store.get_webhook(only_a.id).await.unwrap(),
        Some(only_a.clone())
    );
    assert_eq!(
        store.list_webhooks().await.unwrap(),
        [everywhere.clone(), only_a.clone(), a_and_b.clone()]
    );

    let in_b = document(store, b, "b.txt").await;
    finish_next(store, in_b, 1, t0()).await;
    let claimed = claim(store, 10).await;
    let hooks: HashSet<WebhookId> = claimed.iter().map(|d| d.webhook.id).collect();
    assert_eq!(hooks, HashSet::from([everywhere.id, a_and_b.id]), "not A's");
    for delivery in &claimed {
        store
            .record_delivery(attempted(delivery, t0()))
            .await
            .unwrap();
    }

    let in_a = document(store, a, "a.txt").await;
    finish_next(store, in_a, 1, t0()).await;
    let claimed = claim(store, 10).await;
    let hooks: HashSet<WebhookId> = claimed.iter().map(|d| d.webhook.id).collect();
    assert_eq!(hooks, HashSet::from([everywhere.id, only_a.id, a_and_b.id]));
    let to_a = claimed.iter().find(|d| d.webhook.id == only_a.id).unwrap();
    assert_eq!(
        to_a.webhook, only_a,
        "the claimed webhook carries its scope"
    );
}

pub(super) async fn failing_a_document_writes_its_error(store: &dyn Store) {
    let s = source(store, "Scans").await;
    let ready = webhook(store, "https://ready.example", &[DocumentReady]).await;
    let failed = webhook(store, "https://failed.example", &[DocumentFailed]).await;
    let doc = document(store, s, "broken.pdf").await;
    let at = t0() + Duration::seconds(5);
    let job = store
        .claim_job("w", at, at + Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    store
        .fail_document(&job, "could not parse: bad xref \"table\"", at)
        .await
        .unwrap();

    let claimed = claim(store, 10).await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(claimed[0].webhook.id, failed.id);
    assert_ne!(claimed[0].webhook.id, ready.id);
    assert_eq!(claimed[0].event, DocumentFailed);
    assert_eq!(
        body(&claimed[0]),
        json!({
            "event": "document.failed",
            "timestamp": "2026-05-01T12:00:05.000Z",
            "data": {
                "documentId": doc.to_string(),
                "documentName": "broken.pdf",
                "dataSourceId": s.to_string(),
                "dataSourceName": "Scans",
                "error": "could not parse: bad xref \"table\"",
                "version": 1,
            }
        })
    );
}

/// Each `db.open()` is another handle on the same database: another process or node, or the
/// same one after a restart.
pub(super) async fn deliveries_are_claimed_once_across_handles_and_restarts(db: &TestDb) {
    let first = db.open().await;
    let hook = webhook(&*first, "https://hook.example", &[DocumentReady]).await;
    let s = source(&*first, "S").await;
    let mut docs = Vec::new();
    for i in 0..3 {
        let doc = document(&*first, s, &format!("{i}.txt")).await;
        finish_next(&*first, doc, 1, t0()).await;
        docs.push(doc.to_string());
    }
    assert_eq!(first.pending_deliveries_count(t0()).await.unwrap(), 3);
    assert!(claim(&*first, 0).await.is_empty());

    let claimed = claim(&*first, 2).await;
    assert_eq!(
        claimed.iter().map(document_of).collect::<Vec<_>>(),
        docs[..2],
        "oldest first"
    );
    assert!(claimed.iter().all(|d| d.webhook == hook));
    drop(first);

    // After a restart the claims still hold; the one row left is claimable, once.
    let restarted = db.open().await;
    assert_eq!(restarted.pending_deliveries_count(t0()).await.unwrap(), 1);
    let rest = claim_at(&*restarted, "r", t0(), 10).await;
    assert_eq!(rest.iter().map(document_of).collect::<Vec<_>>(), docs[2..]);
    let other = db.open().await;
    assert!(claim_at(&*other, "o", t0(), 10).await.is_empty());
    assert!(claim_at(&*restarted, "r", t0(), 10).await.is_empty());
    assert_eq!(other.pending_deliveries_count(t0()).await.unwrap(), 0);

    // Two processes claiming at the same time never get the same event: neither fresh rows
    // nor rows whose claim ran out.
    let doc = document(&*other, s, "pii.txt").await;
    let pii = webhook(&*other, "https://pii.example", &[DocumentPiiDetected]).await;
    for _ in 0..20 {
        assert_eq!(
            other
                .enqueue_event(doc, DocumentPiiDetected, Value::Null, t0())
                .await
                .unwrap(),
            1
        );
    }
    let drain = async |store: &dyn Store, claimer: &str, at: DateTime<Utc>| {
        let mut ids = Vec::new();
        loop {
            let batch = claim_at(store, claimer, at, 3).await;
            if batch.is_empty() {
                return ids;
            }
            ids.extend(batch.iter().map(|d| d.event_id));
        }
    };
    let (a, b) = tokio::join!(drain(&*restarted, "r", t0()), drain(&*other, "o", t0()));
    let all: HashSet<EventId> = a.iter().chain(&b).copied().collect();
    assert_eq!(a.len() + b.len(), 20);
    assert_eq!(all.len(), 20, "no event claimed twice");

    // Every claim ran out (both claimers died): the 23 rows come back, each to one claimer.
    let later = t0() + Duration::minutes(2);
    assert_eq!(other.pending_deliveries_count(later).await.unwrap(), 23);
    let (a, b) = tokio::join!(drain(&*restarted, "r2", later), drain(&*other, "o2", later));
    let all: HashSet<EventId> = a.iter().chain(&b).copied().collect();
    assert_eq!(a.len() + b.len(), 23, "{a:?} {b:?}");
    assert_eq!(all.len(), 23, "no expired claim taken over twice");
    assert_eq!(pii.events, [DocumentPiiDetected]);
}

/// A dispatcher that died after claiming (before attempting, or before logging the attempt)
/// leaves its rows claimed; they come back, with the same event, once the claim has run out.
pub(super) async fn a_claimed_delivery_comes_back_when_its_claim_runs_out(db: &TestDb) {
    let crashed = db.open().await;
    let hook = webhook(&*crashed, "https://hook.example", &[DocumentReady]).await;
    let s = source(&*crashed, "S").await;
    let doc = document(&*crashed, s, "a.txt").await;
    finish_next(&*crashed, doc, 2, t0()).await;
    let until = t0() + Duration::seconds(50);
    let taken = crashed
        .claim_deliveries("dead", t0(), until, 10)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    drop(crashed);

    let next = db.open().await;
    for at in [t0() + Duration::seconds(1), until] {
        assert!(
            claim_at(&*next, "next", at, 10).await.is_empty(),
            "claimed until {until}, asked at {at}"
        );
        assert_eq!(next.pending_deliveries_count(at).await.unwrap(), 0);
    }
    let after = until + Duration::milliseconds(1);
    assert_eq!(next.pending_deliveries_count(after).await.unwrap(), 1);
    let again = claim_at(&*next, "next", after, 10).await;
    assert_eq!(again, taken, "the same event, id, webhook and body");
    assert_eq!(again[0].webhook, hook);
    // Claimed anew: held for the new claimer's minute.
    assert!(claim_at(&*next, "third", after, 10).await.is_empty());

    // Logged: gone for good, whatever time it is.
    next.record_delivery(attempted(&again[0], after))
        .await
        .unwrap();
    let log = next.deliveries(hook.id, 10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].event_id, taken[0].event_id);
    let much_later = t0() + Duration::days(30);
    assert!(claim_at(&*next, "later", much_later, 10).await.is_empty());
    assert_eq!(next.pending_deliveries_count(much_later).await.unwrap(), 0);
}

/// A late attempt (the claim ran out and another claimer took the row) is logged too; the row
/// goes with the first attempt logged, and nothing comes back after either.
pub(super) async fn a_logged_delivery_never_comes_back(store: &dyn Store) {
    let hook = webhook(store, "https://hook.example", &[DocumentReady]).await;
    let s = source(store, "S").await;
    for i in 0..2 {
        let doc = document(store, s, &format!("{i}.txt")).await;
        finish_next(store, doc, 1, t0()).await;
    }
    let first = claim_at(store, "slow", t0(), 1).await;
    let later = t0() + Duration::minutes(5);
    let taken_over = claim_at(store, "fast", later, 1).await;
    assert_eq!(taken_over, first, "the claim ran out: the oldest row again");
    store
        .record_delivery(attempted(&taken_over[0], later))
        .await
        .unwrap();
    store
        .record_delivery(attempted(&first[0], later))
        .await
        .unwrap();
    assert_eq!(store.deliveries(hook.id, 10).await.unwrap().len(), 2);

    let rest = claim_at(store, "fast", later, 10).await;
    assert_eq!(rest.len(), 1, "only the other event is left");
    assert_ne!(rest[0].event_id, first[0].event_id);
    store
        .record_delivery(attempted(&rest[0], later))
        .await
        .unwrap();
    let much_later = later + Duration::days(1);
    assert!(claim_at(store, "any", much_later, 10).await.is_empty());
    assert_eq!(store.pending_deliveries_count(much_later).await.unwrap(), 0);
}

/// Releasing claims makes rows claimable at once: those of the claimers whose names start
/// with a prefix (a dispatcher that cut its deliveries short, a node restarting) or everybody's
/// (the only dispatching process starting).
pub(super) async fn released_claims_are_claimable_at_once(store: &dyn Store) {
    webhook(store, "https://hook.example", &[DocumentReady]).await;
    let s = source(store, "S").await;
    for i in 0..3 {
        let doc = document(store, s, &format!("{i}.txt")).await;
        finish_next(store, doc, 1, t0()).await;
    }
    let a = claim_at(store, "node-a:dispatcher-1", t0(), 1).await;
    let b = claim_at(store, "node-b:dispatcher-1", t0(), 1).await;
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!(
        store.release_delivery_claims(Some("nobody")).await.unwrap(),
        0
    );
    assert_eq!(
        store
            .release_delivery_claims(Some("node-a:"))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.pending_deliveries_count(t0()).await.unwrap(), 2);
    let again = claim_at(store, "c", t0(), 10).await;
    assert_eq!(again.len(), 2);
    assert_eq!(again[0], a[0], "oldest first, same event");
    assert_eq!(store.release_delivery_claims(None).await.unwrap(), 3);
    assert_eq!(store.release_delivery_claims(None).await.unwrap(), 0);
    assert_eq!(claim_at(store, "d", t0(), 10).await.len(), 3);
}

pub(super) async fn delivery_log_is_bounded_and_newest_first(store: &dyn Store) {
    let busy = webhook(store, "https://busy.example", &[DocumentReady]).await;
    let calm = webhook(store, "https://calm.example", &[DocumentReady]).await;
    for i in 0..1005 {
        store.record_delivery(attempt(busy.id, i)).await.unwrap();
    }
    let logged = [attempt(calm.id, 0), attempt(calm.id, 1)];
    for a in &logged {
        store.record_delivery(a.clone()).await.unwrap();
    }

    let log = store.deliveries(busy.id, 5000).await.unwrap();
    assert_eq!(log.len(), 1000, "bounded per webhook");
    let latencies: Vec<u64> = log.iter().map(|a| a.latency_ms).collect();
    assert_eq!(
        latencies,
        (5..1005).rev().collect::<Vec<u64>>(),
        "newest first"
    );
    assert!(log.windows(2).all(|w| w[0].sequence > w[1].sequence));
    let newest = store.deliveries(busy.id, 2).await.unwrap();
    assert_eq!(
        newest.iter().map(|a| a.latency_ms).collect::<Vec<_>>(),
        [1004, 1003]
    );

    let calm_log = store.deliveries(calm.id, 10).await.unwrap();
    assert_eq!(calm_log.len(), 2, "other webhooks keep their log");
    let read = &calm_log[1];
    let written = &logged[0];
    assert_eq!(
        (
            read.event_id,
            read.webhook_id,
            read.event,
            read.attempted_at,
            read.status_code,
            read.error.as_deref(),
            read.latency_ms
        ),
        (
            written.event_id,
            calm.id,
            DocumentReady,
            t0(),
            Some(200),
            None,
            0
        )
    );
    assert_eq!(
        (calm_log[0].status_code, calm_log[0].error.as_deref()),
        (None, Some("timeout 1"))
    );

    // An attempt for a webhook deleted meanwhile is dropped.
    let gone = WebhookId::new();
    store.record_delivery(attempt(gone, 0)).await.unwrap();
    assert!(store.deliveries(gone, 10).await.unwrap().is_empty());
}

pub(super) async fn deleting_a_webhook_drops_its_events_and_log(store: &dyn Store) {
    let s = source(store, "S").await;
    let doc = document(store, s, "d.txt").await;
    let kept = webhook(store, "https://kept.example", &[DocumentPiiDetected]).await;
    let gone = webhook(store, "https://gone.example", &[DocumentPiiDetected]).await;
    store.record_delivery(attempt(gone.id, 0)).await.unwrap();
    let extra = json!({"piiTypes": ["email"]});
    assert_eq!(
        store
            .enqueue_event(doc, DocumentPiiDetected, extra, t0())
            .await
            .unwrap(),
        2
    );
    assert!(store.delete_webhook(gone.id).await.unwrap());
    assert_eq!(store.pending_deliveries_count(t0()).await.unwrap(), 1);
    let claimed = claim(store, 10).await;
    assert_eq!(
        claimed.iter().map(|d| d.webhook.id).collect::<Vec<_>>(),
        [kept.id]
    );
    assert!(store.deliveries(gone.id, 10).await.unwrap().is_empty());
}

pub(super) async fn pii_events_carry_the_given_fields(store: &dyn Store) {
    let s: SourceId = source(store, "HR").await;
    let doc = document(store, s, "payroll.csv").await;
    let at = t0() + Duration::milliseconds(7);
    // No subscriber: nothing written, whatever the document.
    assert_eq!(
        store
            .enqueue_event(DocumentId::new(), DocumentPiiDetected, json!({}), at)
            .await
            .unwrap(),
        0
    );
    let hook = webhook(store, "https://pii.example", &[DocumentPiiDetected]).await;
    webhook(store, "https://ready.example", &[DocumentReady]).await;

    let written = store
        .enqueue_event(
            doc,
            DocumentPiiDetected,
            json!({"piiTypes": ["email", "iban"]}),
            at,
        )
        .await
        .unwrap();
    assert_eq!(written, 1);
    let claimed = claim(store, 10).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (claimed[0].webhook.id, claimed[0].event),
        (hook.id, DocumentPiiDetected)
    );
    assert_eq!(
        body(&claimed[0]),
        json!({
            "event": "document.pii_detected",
            "timestamp": "2026-05-01T12:00:00.007Z",
            "data": {
                "documentId": doc.to_string(),
                "documentName": "payroll.csv",
                "dataSourceId": s.to_string(),
                "dataSourceName": "HR",
                "piiTypes": ["email", "iban"],
            }
        })
    );

    for bad in [json!(["email"]), json!({"documentId": "x", "piiTypes": []})] {
        let refused = store.enqueue_event(doc, DocumentPiiDetected, bad, at).await;
        assert!(
            matches!(refused, Err(StoreError::Invalid(_))),
            "{refused:?}"
        );
    }
    let unknown = store
        .enqueue_event(DocumentId::new(), DocumentPiiDetected, json!({}), at)
        .await;
    assert!(
        matches!(unknown, Err(StoreError::Invalid(_))),
        "{unknown:?}"
    );
    assert_eq!(
        store.pending_deliveries_count(t0()).await.unwrap(),
        0,
        "nothing half-written"
    );
}
