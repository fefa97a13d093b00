//! Webhooks, their transactional outbox and their delivery log. An event is written to the
//! outbox by the same transaction that changes the document, one row per subscribed webhook,
//! so a crash can never lose it. A dispatcher claims rows for a while (a lease, which each
//! dialect takes its own way: [`super::Backend::claim_deliveries`]); logging the attempt
//! deletes the row, and a row whose claim ran out (the dispatcher died before logging) is
//! claimed again with the same event id. Each (webhook, event) is attempted once unless a
//! dispatcher dies between claiming and logging.

use chrono::{DateTime, Utc};
use quire_core::{DocumentId, EventId, SourceId, WebhookEvent, WebhookId, webhook};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::records::{self, WEBHOOK_COLUMNS};
use super::sql::{Arg, Cells, Query, Sql};
use super::{Backend, Conn};
use crate::{
    DELIVERY_LOG_LIMIT, DeliveryAttempt, NewDeliveryAttempt, NewWebhook, StoreError, StoreResult,
    WebhookRecord,
};

/// The `data` fields the store fills in from the document for every event.
const DOCUMENT_FIELDS: [&str; 4] = [
    "documentId",
    "documentName",
    "dataSourceId",
    "dataSourceName",
];

/// What an event's body says about its document: read from the store, whatever the dialect.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventDocument {
    /// The document.
    pub(crate) id: DocumentId,
    /// Its name.
    pub(crate) name: String,
    /// Its source.
    pub(crate) source_id: SourceId,
    /// The source's name.
    pub(crate) source_name: String,
    /// Its number of chunks, told by `document.ready`.
    pub(crate) chunk_count: u64,
    /// Why it failed, told by `document.failed`.
    pub(crate) error: Option<String>,
}

impl EventDocument {
    /// The event's `data`: the document's id and name and its source's id and name,
    /// `chunkCount` for `document.ready`, `error` for `document.failed`, then `extra`.
    pub(crate) fn data(self, event: WebhookEvent, extra: Map<String, Value>) -> Map<String, Value> {
        let mut data = Map::new();
        data.insert("documentId".into(), self.id.to_string().into());
        data.insert("documentName".into(), self.name.into());
        data.insert("dataSourceId".into(), self.source_id.to_string().into());
        data.insert("dataSourceName".into(), self.source_name.into());
        match event {
            WebhookEvent::DocumentReady => {
                data.insert("chunkCount".into(), self.chunk_count.into());
            }
            WebhookEvent::DocumentFailed => {
                data.insert("error".into(), self.error.unwrap_or_default().into());
            }
            WebhookEvent::DocumentPiiDetected
            | WebhookEvent::DocumentDeleted
            | WebhookEvent::SourceSynced => {}
        }
        data.extend(extra);
        data
    }
}

/// The `data` field the store adds for this event besides the document's.
fn event_field(event: WebhookEvent) -> Option<&'static str> {
    match event {
        WebhookEvent::DocumentReady => Some("chunkCount"),
        WebhookEvent::DocumentFailed => Some("error"),
        WebhookEvent::DocumentPiiDetected
        | WebhookEvent::DocumentDeleted
        | WebhookEvent::SourceSynced => None,
    }
}

/// `extra` as `data` fields: an object, or null for none.
fn extra_object(extra: Value) -> StoreResult<Map<String, Value>> {
    match extra {
        Value::Object(fields) => Ok(fields),
        Value::Null => Ok(Map::new()),
        other => Err(StoreError::Invalid(format!(
            "event data must be a JSON object, not {other}"
        ))),
    }
}

/// Refuses `extra` fields that repeat one the store fills in.
fn check_extra(event: WebhookEvent, extra: &Map<String, Value>) -> StoreResult<()> {
    match extra
        .keys()
        .find(|k| DOCUMENT_FIELDS.contains(&k.as_str()) || event_field(event) == Some(k.as_str()))
    {
        Some(field) => Err(StoreError::Invalid(format!(
            "event data field {field:?} is filled in by the store"
        ))),
        None => Ok(()),
    }
}

/// The events a webhook subscribes to, each once; at least one.
fn distinct_events(events: Vec<WebhookEvent>) -> StoreResult<Vec<WebhookEvent>> {
    let mut distinct = Vec::with_capacity(events.len());
    for event in events {
        if !distinct.contains(&event) {
            distinct.push(event);
        }
    }
    if distinct.is_empty() {
        return Err(StoreError::Invalid(
            "a webhook must subscribe to at least one event".into(),
        ));
    }
    Ok(distinct)
}

/// [`crate::Store::create_webhook`].
pub(crate) async fn create<B: Backend>(store: &B, new: NewWebhook) -> StoreResult<WebhookRecord> {
    let events = distinct_events(new.events)?;
    let names: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
    let mut tx = store.begin_write().await?;
    tx.execute(
        Query::new(
            "INSERT INTO webhooks (id, url, events, secret, source_ids, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(new.id)
        .bind(&new.url)
        .bind(Value::from(names.clone()).to_string().as_str())
        .bind(&new.secret)
        .bind(Arg::scope(&new.scope))
        .bind(new.created_at),
    )
    .await?;
    for name in names {
        tx.execute(
            Query::new("INSERT INTO webhook_subscriptions (event, webhook_id) VALUES ($1, $2)")
                .bind(name)
                .bind(new.id),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(WebhookRecord {
        id: new.id,
        url: new.url,
        events,
        secret: new.secret,
        scope: new.scope,
        created_at: new.created_at,
    })
}

/// [`crate::Store::list_webhooks`].
pub(crate) async fn list<B: Backend>(store: &B) -> StoreResult<Vec<WebhookRecord>> {
    let query = Query::new(format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY created_at, {}",
        B::SEQ
    ));
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(|row| records::webhook(row, "")).collect()
}

/// [`crate::Store::get_webhook`].
pub(crate) async fn get<B: Backend>(
    store: &B,
    id: WebhookId,
) -> StoreResult<Option<WebhookRecord>> {
    let query = Query::new(format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1"
    ))
    .bind(id);
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref()
        .map(|row| records::webhook(row, ""))
        .transpose()
}

/// Deletes the webhook; its subscriptions, outbox rows and delivery log go with it (foreign
/// keys with `ON DELETE CASCADE`).
pub(crate) async fn delete<B: Backend>(store: &B, id: WebhookId) -> StoreResult<bool> {
    let query = Query::new("DELETE FROM webhooks WHERE id = $1").bind(id);
    Ok(store.write().await?.execute(query).await? == 1)
}

/// [`enqueue`] in a transaction of its own, whose write lock (where the dialect has one)
/// keeps the subscriber and document reads from going stale before the writes.
pub(crate) async fn enqueue_standalone<B: Backend>(
    store: &B,
    document_id: DocumentId,
    event: WebhookEvent,
    extra: Value,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let extra = extra_object(extra)?;
    let mut tx = store.begin_write().await?;
    let written = enqueue::<B>(&mut *tx, document_id, event, extra, now).await?;
    tx.commit().await?;
    Ok(written)
}

/// Writes one outbox row for each webhook subscribed to `event` whose scope holds the
/// document's source, on the caller's connection: call it inside the transaction that changes
/// the document, after that change (so it reads the values it wrote). The body is
/// [`EventDocument::data`] with `extra`, checked by [`check_extra`]. Without a subscriber this
/// is one indexed read and writes nothing, even for an unknown document; otherwise an unknown
/// document is [`StoreError::Invalid`]. Returns the number of rows.
pub(crate) async fn enqueue<B: Backend>(
    conn: &mut Conn<B>,
    document_id: DocumentId,
    event: WebhookEvent,
    extra: Map<String, Value>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    check_extra(event, &extra)?;
    let subscribers = subscribers::<B>(conn, event).await?;
    if subscribers.is_empty() {
        return Ok(0);
    }
    let Some(doc) = conn
        .fetch_optional(
            Query::new(
                "SELECT d.name, d.source_id, s.name AS source_name, d.chunk_count, d.error
                 FROM documents d JOIN sources s ON s.id = d.source_id
                 WHERE d.id = $1",
            )
            .bind(document_id),
        )
        .await?
    else {
        return Err(StoreError::Invalid(format!(
            "document {document_id} does not exist"
        )));
    };
    let mut error = doc.opt_text("error")?;
    // A version that failed while another stays live keeps its reason on its own row.
    if let (WebhookEvent::DocumentFailed, Some(version)) =
        (event, extra.get("version").and_then(Value::as_u64))
    {
        let row = conn
            .fetch_optional(
                Query::new(
                    "SELECT error FROM document_versions WHERE document_id = $1 AND version = $2",
                )
                .bind(document_id)
                .bind(version),
            )
            .await?;
        if let Some(row) = row {
            error = row.opt_text("error")?.or(error);
        }
    }
    let doc = EventDocument {
        id: document_id,
        name: doc.text("name")?,
        source_id: doc.id("source_id")?,
        source_name: doc.text("source_name")?,
        chunk_count: doc.count("chunk_count")?,
        error,
    };
    let source_id = doc.source_id;
    let body = webhook::envelope_body(event, now, doc.data(event, extra));
    write_rows::<B>(conn, &subscribers, source_id, event, &body, now).await
}

/// Writes one outbox row for each webhook subscribed to `event` (an event about a source, not
/// a document: `source.synced`) whose scope holds `source`, with `data` as the body's data, on
/// the caller's connection (inside the transaction that records what happened). Returns the
/// number of rows.
pub(crate) async fn enqueue_for_source<B: Backend>(
    conn: &mut Conn<B>,
    source: SourceId,
    event: WebhookEvent,
    data: Map<String, Value>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let subscribers = subscribers::<B>(conn, event).await?;
    if subscribers.is_empty() {
        return Ok(0);
    }
    let body = webhook::envelope_body(event, now, data);
    write_rows::<B>(conn, &subscribers, source, event, &body, now).await
}

/// A webhook subscribed to an event: its id and its source scope (`None`: every source).
type Subscriber = (Uuid, Option<Vec<Uuid>>);

/// The webhooks subscribed to `event`, in id order.
async fn subscribers<B: Backend>(
    conn: &mut Conn<B>,
    event: WebhookEvent,
) -> StoreResult<Vec<Subscriber>> {
    // FOR KEY SHARE: a webhook deleted meanwhile on another node is either gone from this list
    // or waits until these rows are written (and then takes them with it).
    let rows = conn
        .fetch_all(
            Query::new(format!(
                "SELECT w.id, w.source_ids
                 FROM webhook_subscriptions s JOIN webhooks w ON w.id = s.webhook_id
                 WHERE s.event = $1 ORDER BY w.id {}",
                B::lock("FOR KEY SHARE OF w")
            ))
            .bind(event.as_str()),
        )
        .await?;
    rows.iter()
        .map(|row| Ok((row.uuid("id")?, row.opt_ids("source_ids")?)))
        .collect()
}

/// One outbox row with `body` for each of `subscribers` whose scope holds `source`.
async fn write_rows<B: Backend>(
    conn: &mut Conn<B>,
    subscribers: &[Subscriber],
    source: SourceId,
    event: WebhookEvent,
    body: &str,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    // A webhook receives only the events of the sources in its scope (NULL: every source).
    let in_scope: Vec<Uuid> = subscribers
        .iter()
        .filter(|(_, scope)| scope.as_ref().is_none_or(|ids| ids.contains(&source.0)))
        .map(|(id, _)| *id)
        .collect();
    if in_scope.is_empty() {
        return Ok(0);
    }
    // One row per subscriber, in subscriber order, so their seq (the delivery order) follows it.
    for webhook_id in &in_scope {
        conn.execute(
            Query::new(
                "INSERT INTO webhook_outbox (event_id, webhook_id, event, body, created_at)
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(EventId::new())
            .bind(*webhook_id)
            .bind(event.as_str())
            .bind(body)
            .bind(now),
        )
        .await?;
    }
    Ok(in_scope.len() as u64)
}

/// Rows a dispatcher may take at `$1`: never claimed, released, or claimed until before then.
pub(crate) const CLAIMABLE: &str = "(claimed_until IS NULL OR claimed_until < $1)";

/// [`crate::Store::record_delivery`].
pub(crate) async fn record<B: Backend>(store: &B, attempt: NewDeliveryAttempt) -> StoreResult<()> {
    let mut tx = store.begin_write().await?;
    // A webhook deleted while its event was in flight has no log to append to; the lock keeps
    // it from being deleted before this attempt is written.
    let exists = tx
        .exists(
            Query::new(format!(
                "SELECT 1 FROM webhooks WHERE id = $1 {}",
                B::lock("FOR KEY SHARE")
            ))
            .bind(attempt.webhook_id),
        )
        .await?;
    if !exists {
        tx.rollback().await?;
        return Ok(());
    }
    tx.execute(
        Query::new(
            "INSERT INTO webhook_deliveries
                 (event_id, webhook_id, event, attempted_at, status_code, error, latency_ms)
             VALUES ($1, $2, $3, $4, CAST($5 AS INTEGER), $6, $7)",
        )
        .bind(attempt.event_id)
        .bind(attempt.webhook_id)
        .bind(attempt.event.as_str())
        .bind(attempt.attempted_at)
        .bind(Arg::Int(attempt.status_code.map(i64::from)))
        .bind(&attempt.error)
        .bind(attempt.latency_ms),
    )
    .await?;
    tx.execute(
        Query::new(
            "DELETE FROM webhook_deliveries
             WHERE webhook_id = $1 AND seq <= (
                 SELECT seq FROM webhook_deliveries WHERE webhook_id = $1
                 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
        )
        .bind(attempt.webhook_id)
        .bind(DELIVERY_LOG_LIMIT),
    )
    .await?;
    // The attempt is logged, so the event's outbox row has served its purpose: it is never
    // claimed again, whoever holds its claim now.
    tx.execute(Query::new("DELETE FROM webhook_outbox WHERE event_id = $1").bind(attempt.event_id))
        .await?;
    tx.commit().await?;
    Ok(())
}

/// [`crate::Store::deliveries`].
pub(crate) async fn deliveries<B: Backend>(
    store: &B,
    webhook_id: WebhookId,
    limit: u32,
) -> StoreResult<Vec<DeliveryAttempt>> {
    let query = Query::new(
        "SELECT seq, event_id, webhook_id, event, attempted_at, status_code, error, latency_ms
         FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT $2",
    )
    .bind(webhook_id)
    .bind(limit);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::attempt).collect()
}

/// [`crate::Store::release_delivery_claims`].
pub(crate) async fn release<B: Backend>(store: &B, claimer: Option<&str>) -> StoreResult<u64> {
    let query = Query::new(
        "UPDATE webhook_outbox SET claimed_by = NULL, claimed_until = NULL
         WHERE claimed_until IS NOT NULL
           AND (CAST($1 AS TEXT) IS NULL
                OR substr(claimed_by, 1, length(CAST($1 AS TEXT))) = CAST($1 AS TEXT))",
    )
    .bind(claimer);
    store.write().await?.execute(query).await
}

/// [`crate::Store::pending_deliveries_count`].
pub(crate) async fn pending_count<B: Backend>(store: &B, now: DateTime<Utc>) -> StoreResult<u64> {
    let query = Query::new(format!(
        "SELECT COUNT(*) AS n FROM webhook_outbox WHERE {CLAIMABLE}"
    ))
    .bind(now);
    store.read().await?.fetch_one(query).await?.count("n")
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn document() -> EventDocument {
        EventDocument {
            id: DocumentId(uuid::Uuid::from_u128(1)),
            name: "pump.md".into(),
            source_id: SourceId(uuid::Uuid::from_u128(2)),
            source_name: "Manuals".into(),
            chunk_count: 7,
            error: Some("no text".into()),
        }
    }

    /// Each event tells the document's fields, its own one, and the caller's extras.
    #[test]
    fn the_body_names_the_document_and_the_event_field() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let ready = webhook::envelope_body(
            WebhookEvent::DocumentReady,
            at,
            document().data(WebhookEvent::DocumentReady, Map::new()),
        );
        assert_eq!(
            serde_json::from_str::<Value>(&ready).unwrap(),
            json!({
                "event": "document.ready",
                "timestamp": "2026-01-02T03:04:05.000Z",
                "data": {
                    "documentId": "00000000-0000-0000-0000-000000000001",
                    "documentName": "pump.md",
                    "dataSourceId": "00000000-0000-0000-0000-000000000002",
                    "dataSourceName": "Manuals",
                    "chunkCount": 7,
                },
            })
        );
        let extra = extra_object(json!({"piiTypes": ["email"]})).unwrap();
        let held = document().data(WebhookEvent::DocumentPiiDetected, extra);
        assert_eq!(held.get("piiTypes"), Some(&json!(["email"])));
        assert_eq!(held.get("chunkCount"), None);
        let failed = document().data(WebhookEvent::DocumentFailed, Map::new());
        assert_eq!(failed.get("error"), Some(&json!("no text")));
    }

    /// Extras may not repeat what the store fills in, and must be an object.
    #[test]
    fn extras_are_an_object_of_new_fields() {
        let extra = extra_object(json!({"chunkCount": 1})).unwrap();
        assert!(check_extra(WebhookEvent::DocumentReady, &extra).is_err());
        assert!(check_extra(WebhookEvent::DocumentPiiDetected, &extra).is_ok());
        let extra = extra_object(json!({"documentName": "x"})).unwrap();
        assert!(check_extra(WebhookEvent::DocumentPiiDetected, &extra).is_err());
        assert!(extra_object(json!([1])).is_err());
        assert!(extra_object(Value::Null).unwrap().is_empty());
    }
}
