//! Webhooks, their transactional outbox and their delivery log. An event is written to the
//! outbox by the same transaction that changes the document, one row per subscribed webhook,
//! so a crash can never lose it. Dispatchers on any node claim rows for a while (a lease) with
//! `FOR UPDATE SKIP LOCKED`, so one node holds a row at a time; logging the attempt deletes
//! the row, and a row whose claim ran out (its node died before logging) is claimed again with
//! the same event id. Each (webhook, event) is attempted once unless a node dies between
//! claiming and logging.

use chrono::{DateTime, Utc};
use quire_core::{DocumentId, EventId, SourceId, SourceScope, WebhookEvent, WebhookId, webhook};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::codec;
use crate::{
    DELIVERY_LOG_LIMIT, DeliveryAttempt, NewDeliveryAttempt, NewWebhook, PendingDelivery,
    StoreError, StoreResult, WebhookRecord,
};

const WEBHOOK_COLUMNS: &str = "id, url, events, secret, source_ids, created_at";

/// The `data` fields the store fills in from the document for every event.
const DOCUMENT_FIELDS: [&str; 4] = [
    "documentId",
    "documentName",
    "dataSourceId",
    "dataSourceName",
];

pub(super) async fn create(pool: &PgPool, new: NewWebhook) -> StoreResult<WebhookRecord> {
    let mut events = Vec::with_capacity(new.events.len());
    for event in new.events {
        if !events.contains(&event) {
            events.push(event);
        }
    }
    if events.is_empty() {
        return Err(StoreError::Invalid(
            "a webhook must subscribe to at least one event".into(),
        ));
    }
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO webhooks (id, url, events, secret, source_ids, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(new.id.0)
    .bind(&new.url)
    .bind(events_json(&events))
    .bind(&new.secret)
    .bind(codec::scope_ids(&new.scope))
    .bind(new.created_at)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO webhook_subscriptions (event, webhook_id) SELECT UNNEST($1::text[]), $2",
    )
    .bind(events.iter().map(|e| e.as_str()).collect::<Vec<_>>())
    .bind(new.id.0)
    .execute(&mut *tx)
    .await?;
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

pub(super) async fn list(pool: &PgPool) -> StoreResult<Vec<WebhookRecord>> {
    sqlx::query(&format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY created_at, seq"
    ))
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| webhook_from_row(row, ""))
    .collect()
}

pub(super) async fn get(pool: &PgPool, id: WebhookId) -> StoreResult<Option<WebhookRecord>> {
    sqlx::query(&format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1"
    ))
    .bind(id.0)
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(|row| webhook_from_row(row, ""))
    .transpose()
}

/// Deletes the webhook; its subscriptions, outbox rows and delivery log go with it (foreign
/// keys with `ON DELETE CASCADE`).
pub(super) async fn delete(pool: &PgPool, id: WebhookId) -> StoreResult<bool> {
    let deleted = sqlx::query("DELETE FROM webhooks WHERE id = $1")
        .bind(id.0)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(deleted == 1)
}

/// [`enqueue`] in a transaction of its own.
pub(super) async fn enqueue_standalone(
    pool: &PgPool,
    document_id: DocumentId,
    event: WebhookEvent,
    extra: Value,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let extra = match extra {
        Value::Object(fields) => fields,
        Value::Null => Map::new(),
        other => {
            return Err(StoreError::Invalid(format!(
                "event data must be a JSON object, not {other}"
            )));
        }
    };
    let mut tx = pool.begin().await?;
    let written = enqueue(&mut tx, document_id, event, extra, now).await?;
    tx.commit().await?;
    Ok(written)
}

/// Writes one outbox row for each webhook subscribed to `event`, on the caller's connection:
/// call it inside the transaction that changes the document, after that change (so it reads
/// the values it wrote). The body's `data` holds the document's id and name and its source's
/// id and name, `chunkCount` for `document.ready`, `error` for `document.failed`, then the
/// fields of `extra`, which may not repeat any of those. Without a subscriber this is one
/// indexed read and writes nothing, even for an unknown document; otherwise an unknown
/// document is [`StoreError::Invalid`]. Returns the number of rows.
pub(super) async fn enqueue(
    conn: &mut PgConnection,
    document_id: DocumentId,
    event: WebhookEvent,
    extra: Map<String, Value>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    if let Some(field) = extra
        .keys()
        .find(|k| DOCUMENT_FIELDS.contains(&k.as_str()) || event_field(event) == Some(k.as_str()))
    {
        return Err(StoreError::Invalid(format!(
            "event data field {field:?} is filled in by the store"
        )));
    }
    // FOR KEY SHARE: a webhook deleted meanwhile on another node is either gone from this list
    // or waits until these rows are written (and then takes them with it).
    let subscribers: Vec<(Uuid, Option<Vec<Uuid>>)> = sqlx::query_as(
        "SELECT w.id, w.source_ids FROM webhook_subscriptions s JOIN webhooks w ON w.id = s.webhook_id
         WHERE s.event = $1 ORDER BY w.id FOR KEY SHARE OF w",
    )
    .bind(event.as_str())
    .fetch_all(&mut *conn)
    .await?;
    if subscribers.is_empty() {
        return Ok(0);
    }
    let Some(doc) = sqlx::query(
        "SELECT d.name, d.source_id, s.name AS source_name, d.chunk_count, d.error
         FROM documents d JOIN sources s ON s.id = d.source_id
         WHERE d.id = $1",
    )
    .bind(document_id.0)
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Err(StoreError::Invalid(format!(
            "document {document_id} does not exist"
        )));
    };
    let source_id: Uuid = doc.try_get("source_id")?;
    // A webhook receives only the events of the sources in its scope (NULL: every source).
    let subscribers: Vec<Uuid> = subscribers
        .into_iter()
        .filter(|(_, sources)| sources.as_ref().is_none_or(|ids| ids.contains(&source_id)))
        .map(|(id, _)| id)
        .collect();
    if subscribers.is_empty() {
        return Ok(0);
    }
    let mut data = Map::new();
    data.insert("documentId".into(), document_id.to_string().into());
    data.insert(
        "documentName".into(),
        doc.try_get::<String, _>("name")?.into(),
    );
    data.insert(
        "dataSourceId".into(),
        source_id.hyphenated().to_string().into(),
    );
    data.insert(
        "dataSourceName".into(),
        doc.try_get::<String, _>("source_name")?.into(),
    );
    match event {
        WebhookEvent::DocumentReady => {
            let chunks = codec::count(doc.try_get("chunk_count")?);
            data.insert("chunkCount".into(), chunks.into());
        }
        WebhookEvent::DocumentFailed => {
            let error: Option<String> = doc.try_get("error")?;
            data.insert("error".into(), error.unwrap_or_default().into());
        }
        WebhookEvent::DocumentPiiDetected => {}
    }
    data.extend(extra);
    let body = webhook::envelope_body(event, now, data);
    let event_ids: Vec<Uuid> = subscribers.iter().map(|_| EventId::new().0).collect();
    // Rows in subscriber order, so their seq (the delivery order) follows it.
    sqlx::query(
        "INSERT INTO webhook_outbox (event_id, webhook_id, event, body, created_at)
         SELECT r.event_id, r.webhook_id, $3, $4, $5
         FROM UNNEST($1::uuid[], $2::uuid[]) WITH ORDINALITY AS r (event_id, webhook_id, n)
         ORDER BY r.n",
    )
    .bind(&event_ids)
    .bind(&subscribers)
    .bind(event.as_str())
    .bind(&body)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(subscribers.len() as u64)
}

/// The `data` field the store adds for this event besides the document's.
fn event_field(event: WebhookEvent) -> Option<&'static str> {
    match event {
        WebhookEvent::DocumentReady => Some("chunkCount"),
        WebhookEvent::DocumentFailed => Some("error"),
        WebhookEvent::DocumentPiiDetected => None,
    }
}

/// Who claims outbox rows, at what time, and until when.
pub(super) struct Claim<'a> {
    pub(super) claimer: &'a str,
    pub(super) now: DateTime<Utc>,
    pub(super) until: DateTime<Utc>,
}

/// Rows a dispatcher may take at `$1`: never claimed, released, or claimed until before then.
const CLAIMABLE: &str = "(claimed_until IS NULL OR claimed_until < $1)";

pub(super) async fn claim(
    pool: &PgPool,
    claim: &Claim<'_>,
    limit: u32,
) -> StoreResult<Vec<PendingDelivery>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    // One statement picks, locks and claims the rows; SKIP LOCKED lets dispatchers on other
    // nodes take the next rows instead of waiting for these, and never the same ones (a row
    // another claimer committed meanwhile is checked again against the condition, and fails
    // it).
    let rows = sqlx::query(&format!(
        "WITH claimed AS (
             UPDATE webhook_outbox o SET claimed_by = $2, claimed_until = $3
             FROM (SELECT seq FROM webhook_outbox WHERE {CLAIMABLE}
                   ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED) pick
             WHERE o.seq = pick.seq
             RETURNING o.seq, o.event_id, o.webhook_id, o.event, o.body, o.created_at)
         SELECT c.seq, c.event_id, c.event, c.body, c.created_at,
                w.id AS webhook_id, w.url AS webhook_url, w.events AS webhook_events,
                w.secret AS webhook_secret, w.source_ids AS webhook_source_ids,
                w.created_at AS webhook_created_at
         FROM claimed c JOIN webhooks w ON w.id = c.webhook_id
         ORDER BY c.seq"
    ))
    .bind(claim.now)
    .bind(claim.claimer)
    .bind(claim.until)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(PendingDelivery {
                event_id: row.try_get::<Uuid, _>("event_id")?.into(),
                webhook: webhook_from_row(row, "webhook_")?,
                event: event_from(&row.try_get::<String, _>("event")?)?,
                body: row.try_get("body")?,
                created_at: row.try_get("created_at")?,
            })
        })
        .collect()
}

pub(super) async fn record(pool: &PgPool, attempt: NewDeliveryAttempt) -> StoreResult<()> {
    let webhook_id = attempt.webhook_id.0;
    let mut tx = pool.begin().await?;
    // A webhook deleted while its event was in flight has no log to append to; the lock keeps
    // it from being deleted before this attempt is written.
    let exists = sqlx::query("SELECT 1 FROM webhooks WHERE id = $1 FOR KEY SHARE")
        .bind(webhook_id)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
    if !exists {
        tx.rollback().await?;
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO webhook_deliveries
             (event_id, webhook_id, event, attempted_at, status_code, error, latency_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(attempt.event_id.0)
    .bind(webhook_id)
    .bind(attempt.event.as_str())
    .bind(attempt.attempted_at)
    .bind(attempt.status_code.map(i32::from))
    .bind(&attempt.error)
    .bind(codec::limit(attempt.latency_ms))
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "DELETE FROM webhook_deliveries
         WHERE webhook_id = $1 AND seq <= (
             SELECT seq FROM webhook_deliveries WHERE webhook_id = $1
             ORDER BY seq DESC LIMIT 1 OFFSET $2)",
    )
    .bind(webhook_id)
    .bind(i64::from(DELIVERY_LOG_LIMIT))
    .execute(&mut *tx)
    .await?;
    // The attempt is logged, so the event's outbox row has served its purpose: it is never
    // claimed again, whoever holds its claim now.
    sqlx::query("DELETE FROM webhook_outbox WHERE event_id = $1")
        .bind(attempt.event_id.0)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn deliveries(
    pool: &PgPool,
    webhook_id: WebhookId,
    limit: u32,
) -> StoreResult<Vec<DeliveryAttempt>> {
    sqlx::query(
        "SELECT seq, event_id, webhook_id, event, attempted_at, status_code, error, latency_ms
         FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT $2",
    )
    .bind(webhook_id.0)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(attempt_from_row)
    .collect()
}

pub(super) async fn release(pool: &PgPool, claimer: Option<&str>) -> StoreResult<u64> {
    let released = sqlx::query(
        "UPDATE webhook_outbox SET claimed_by = NULL, claimed_until = NULL
         WHERE claimed_until IS NOT NULL
           AND ($1::TEXT IS NULL OR left(claimed_by, length($1::TEXT)) = $1::TEXT)",
    )
    .bind(claimer)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(released)
}

pub(super) async fn pending_count(pool: &PgPool, now: DateTime<Utc>) -> StoreResult<u64> {
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM webhook_outbox WHERE {CLAIMABLE}"
    ))
    .bind(now)
    .fetch_one(pool)
    .await?;
    Ok(codec::count(n))
}

fn events_json(events: &[WebhookEvent]) -> String {
    Value::from(events.iter().map(|e| e.as_str()).collect::<Vec<_>>()).to_string()
}

fn event_from(raw: &str) -> StoreResult<WebhookEvent> {
    raw.parse()
        .map_err(|e: quire_core::UnknownWebhookEvent| StoreError::Corrupt(e.to_string()))
}

/// The webhook in `row`, whose columns carry `prefix` (claims select them beside the event's).
fn webhook_from_row(row: &PgRow, prefix: &str) -> StoreResult<WebhookRecord> {
    let column = |name: &str| format!("{prefix}{name}");
    let events: String = row.try_get(column("events").as_str())?;
    let events: Vec<WebhookEvent> = serde_json::from_str(&events)
        .map_err(|e| StoreError::Corrupt(format!("webhook events {events:?}: {e}")))?;
    Ok(WebhookRecord {
        id: row.try_get::<Uuid, _>(column("id").as_str())?.into(),
        url: row.try_get(column("url").as_str())?,
        events,
        secret: row.try_get(column("secret").as_str())?,
        scope: match row.try_get::<Option<Vec<Uuid>>, _>(column("source_ids").as_str())? {
            None => SourceScope::All,
            Some(ids) => SourceScope::only(ids.into_iter().map(SourceId::from)),
        },
        created_at: row.try_get(column("created_at").as_str())?,
    })
}

fn attempt_from_row(row: &PgRow) -> StoreResult<DeliveryAttempt> {
    let status_code = row
        .try_get::<Option<i32>, _>("status_code")?
        .map(|code| {
            u16::try_from(code)
                .map_err(|_| StoreError::Corrupt(format!("HTTP status {code} out of range")))
        })
        .transpose()?;
    Ok(DeliveryAttempt {
        sequence: codec::count(row.try_get("seq")?),
        event_id: row.try_get::<Uuid, _>("event_id")?.into(),
        webhook_id: row.try_get::<Uuid, _>("webhook_id")?.into(),
        event: event_from(&row.try_get::<String, _>("event")?)?,
        attempted_at: row.try_get("attempted_at")?,
        status_code,
        error: row.try_get("error")?,
        latency_ms: codec::count(row.try_get("latency_ms")?),
    })
}
