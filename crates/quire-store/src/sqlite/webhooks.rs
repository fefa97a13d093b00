//! Webhooks, their transactional outbox and their delivery log. An event is written to the
//! outbox by the same transaction that changes the document, one row per subscribed webhook,
//! so a crash can never lose it. A dispatcher claims rows for a while (a lease); logging the
//! attempt deletes the row, and a row whose claim ran out (the dispatcher died before logging)
//! is claimed again with the same event id. Each (webhook, event) is attempted once unless a
//! dispatcher dies between claiming and logging.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use quire_core::{DocumentId, EventId, SourceScope, WebhookEvent, WebhookId, webhook};
use serde_json::{Map, Value};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, SqlitePool};

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

pub(super) async fn create(pool: &SqlitePool, new: NewWebhook) -> StoreResult<WebhookRecord> {
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
    let id = new.id.to_string();
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO webhooks (id, url, events, secret, source_ids, created_at)
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(&id)
    .bind(&new.url)
    .bind(events_json(&events))
    .bind(&new.secret)
    .bind(scope_json(&new.scope))
    .bind(codec::millis(new.created_at))
    .execute(&mut *tx)
    .await?;
    for event in &events {
        sqlx::query("INSERT INTO webhook_subscriptions (event, webhook_id) VALUES (?, ?)")
            .bind(event.as_str())
            .bind(&id)
            .execute(&mut *tx)
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

pub(super) async fn list(pool: &SqlitePool) -> StoreResult<Vec<WebhookRecord>> {
    sqlx::query(&format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY created_at, rowid"
    ))
    .fetch_all(pool)
    .await?
    .iter()
    .map(webhook_from_row)
    .collect()
}

pub(super) async fn get(pool: &SqlitePool, id: WebhookId) -> StoreResult<Option<WebhookRecord>> {
    sqlx::query(&format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?"
    ))
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(webhook_from_row)
    .transpose()
}

/// Deletes the webhook; its subscriptions, outbox rows and delivery log go with it (foreign
/// keys with `ON DELETE CASCADE`).
pub(super) async fn delete(pool: &SqlitePool, id: WebhookId) -> StoreResult<bool> {
    let deleted = sqlx::query("DELETE FROM webhooks WHERE id = ?")
        .bind(id.to_string())
        .execute(pool)
        .await?
        .rows_affected();
    Ok(deleted == 1)
}

/// [`enqueue`] in a transaction of its own.
pub(super) async fn enqueue_standalone(
    pool: &SqlitePool,
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
    // IMMEDIATE: the subscriber and document reads below must not go stale before the writes.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let written = enqueue(&mut tx, document_id, event, extra, now).await?;
    tx.commit().await?;
    Ok(written)
}

/// Writes one outbox row for each webhook subscribed to `event`, on the caller's connection:
/// call it inside the transaction that changes the document, after that change (so it already
/// holds the write lock and reads the values it wrote). The body's `data` holds the document's
/// id and name and its source's id and name, `chunkCount` for `document.ready`, `error` for
/// `document.failed`, then the fields of `extra`, which may not repeat any of those. Without a
/// subscriber this is one indexed read and writes nothing, even for an unknown document;
/// otherwise an unknown document is [`StoreError::Invalid`]. Returns the number of rows.
pub(super) async fn enqueue(
    conn: &mut SqliteConnection,
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
    let subscribers: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT s.webhook_id, w.source_ids
         FROM webhook_subscriptions s JOIN webhooks w ON w.id = s.webhook_id
         WHERE s.event = ? ORDER BY s.webhook_id",
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
         WHERE d.id = ?",
    )
    .bind(document_id.to_string())
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Err(StoreError::Invalid(format!(
            "document {document_id} does not exist"
        )));
    };
    let source_id: String = doc.try_get("source_id")?;
    let mut subscribers_in_scope = Vec::with_capacity(subscribers.len());
    for (webhook_id, source_ids) in subscribers {
        if scope_from(source_ids.as_deref())?.allows(codec::id(&source_id)?) {
            subscribers_in_scope.push(webhook_id);
        }
    }
    if subscribers_in_scope.is_empty() {
        return Ok(0);
    }
    let mut data = Map::new();
    data.insert("documentId".into(), document_id.to_string().into());
    data.insert(
        "documentName".into(),
        doc.try_get::<String, _>("name")?.into(),
    );
    data.insert("dataSourceId".into(), source_id.into());
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
    for webhook_id in &subscribers_in_scope {
        sqlx::query(
            "INSERT INTO webhook_outbox (event_id, webhook_id, event, body, created_at)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(EventId::new().to_string())
        .bind(webhook_id)
        .bind(event.as_str())
        .bind(&body)
        .bind(codec::millis(now))
        .execute(&mut *conn)
        .await?;
    }
    Ok(subscribers_in_scope.len() as u64)
}

/// The stored form of a webhook's scope: NULL for every source, a JSON array of ids otherwise.
fn scope_json(scope: &SourceScope) -> Option<String> {
    scope
        .source_ids()
        .map(|ids| Value::Array(ids.iter().map(|id| id.to_string().into()).collect()).to_string())
}

fn scope_from(stored: Option<&str>) -> StoreResult<SourceScope> {
    let Some(json) = stored else {
        return Ok(SourceScope::All);
    };
    let ids: Vec<String> = serde_json::from_str(json)
        .map_err(|e| StoreError::Corrupt(format!("webhook sources {json:?}: {e}")))?;
    Ok(SourceScope::only(
        ids.iter()
            .map(|id| codec::id(id))
            .collect::<StoreResult<Vec<_>>>()?,
    ))
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

/// Rows a dispatcher may take at `?1`: never claimed, released, or claimed until before then.
const CLAIMABLE: &str = "(claimed_until IS NULL OR claimed_until < ?1)";

pub(super) async fn claim(
    pool: &SqlitePool,
    claim: &Claim<'_>,
    limit: u32,
) -> StoreResult<Vec<PendingDelivery>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let now = codec::millis(claim.now);
    // Idle dispatchers poll often; a read first keeps them from taking the write lock for
    // nothing.
    let pending = sqlx::query(&format!(
        "SELECT 1 FROM webhook_outbox WHERE {CLAIMABLE} LIMIT 1"
    ))
    .bind(now)
    .fetch_optional(pool)
    .await?;
    if pending.is_none() {
        return Ok(Vec::new());
    }
    let mut tx = pool.begin().await?;
    // One statement picks and claims the rows under the write lock: no other claimer can see
    // them claimable until the claim runs out.
    let claimed = sqlx::query(&format!(
        "UPDATE webhook_outbox SET claimed_by = ?2, claimed_until = ?3
         WHERE seq IN (
             SELECT seq FROM webhook_outbox WHERE {CLAIMABLE} ORDER BY seq LIMIT ?4)
         RETURNING seq, event_id, webhook_id, event, body, created_at"
    ))
    .bind(now)
    .bind(claim.claimer)
    .bind(codec::millis(claim.until))
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await?;
    if claimed.is_empty() {
        tx.rollback().await?;
        return Ok(Vec::new());
    }
    let mut webhook_ids: Vec<String> = claimed
        .iter()
        .map(|row| row.try_get("webhook_id"))
        .collect::<Result<_, _>>()?;
    webhook_ids.sort();
    webhook_ids.dedup();
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id IN "
    ));
    codec::push_id_list(&mut qb, &webhook_ids);
    let webhooks: HashMap<WebhookId, WebhookRecord> = qb
        .build()
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| webhook_from_row(row).map(|w| (w.id, w)))
        .collect::<StoreResult<_>>()?;
    let mut deliveries = Vec::with_capacity(claimed.len());
    for row in &claimed {
        let webhook_id: WebhookId = codec::id(&row.try_get::<String, _>("webhook_id")?)?;
        let webhook = webhooks.get(&webhook_id).cloned().ok_or_else(|| {
            StoreError::Corrupt(format!("outbox row for missing webhook {webhook_id}"))
        })?;
        let seq: i64 = row.try_get("seq")?;
        deliveries.push((
            seq,
            PendingDelivery {
                event_id: codec::id(&row.try_get::<String, _>("event_id")?)?,
                webhook,
                event: event_from(&row.try_get::<String, _>("event")?)?,
                body: row.try_get("body")?,
                created_at: codec::time(row.try_get("created_at")?)?,
            },
        ));
    }
    tx.commit().await?;
    // RETURNING does not promise an order.
    deliveries.sort_by_key(|(seq, _)| *seq);
    Ok(deliveries.into_iter().map(|(_, d)| d).collect())
}

pub(super) async fn record(pool: &SqlitePool, attempt: NewDeliveryAttempt) -> StoreResult<()> {
    let webhook_id = attempt.webhook_id.to_string();
    let event_id = attempt.event_id.to_string();
    let mut tx = pool.begin().await?;
    // A webhook deleted while its event was in flight has no log to append to.
    let inserted = sqlx::query(
        "INSERT INTO webhook_deliveries
             (event_id, webhook_id, event, attempted_at, status_code, error, latency_ms)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?2)",
    )
    .bind(&event_id)
    .bind(&webhook_id)
    .bind(attempt.event.as_str())
    .bind(codec::millis(attempt.attempted_at))
    .bind(attempt.status_code.map(i64::from))
    .bind(&attempt.error)
    .bind(i64::try_from(attempt.latency_ms).unwrap_or(i64::MAX))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 0 {
        tx.rollback().await?;
        return Ok(());
    }
    sqlx::query(
        "DELETE FROM webhook_deliveries
         WHERE webhook_id = ?1 AND seq <= (
             SELECT seq FROM webhook_deliveries WHERE webhook_id = ?1
             ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
    )
    .bind(&webhook_id)
    .bind(i64::from(DELIVERY_LOG_LIMIT))
    .execute(&mut *tx)
    .await?;
    // The attempt is logged, so the event's outbox row has served its purpose: it is never
    // claimed again, whoever holds its claim now.
    sqlx::query("DELETE FROM webhook_outbox WHERE event_id = ?")
        .bind(&event_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn deliveries(
    pool: &SqlitePool,
    webhook_id: WebhookId,
    limit: u32,
) -> StoreResult<Vec<DeliveryAttempt>> {
    sqlx::query(
        "SELECT seq, event_id, webhook_id, event, attempted_at, status_code, error, latency_ms
         FROM webhook_deliveries WHERE webhook_id = ? ORDER BY seq DESC LIMIT ?",
    )
    .bind(webhook_id.to_string())
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(attempt_from_row)
    .collect()
}

pub(super) async fn release(pool: &SqlitePool, claimer: Option<&str>) -> StoreResult<u64> {
    let released = sqlx::query(
        "UPDATE webhook_outbox SET claimed_by = NULL, claimed_until = NULL
         WHERE claimed_until IS NOT NULL
           AND (?1 IS NULL OR substr(claimed_by, 1, length(?1)) = ?1)",
    )
    .bind(claimer)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(released)
}

pub(super) async fn pending_count(pool: &SqlitePool, now: DateTime<Utc>) -> StoreResult<u64> {
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM webhook_outbox WHERE {CLAIMABLE}"
    ))
    .bind(codec::millis(now))
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

fn webhook_from_row(row: &SqliteRow) -> StoreResult<WebhookRecord> {
    let events: String = row.try_get("events")?;
    let events: Vec<WebhookEvent> = serde_json::from_str(&events)
        .map_err(|e| StoreError::Corrupt(format!("webhook events {events:?}: {e}")))?;
    Ok(WebhookRecord {
        id: codec::id(&row.try_get::<String, _>("id")?)?,
        url: row.try_get("url")?,
        events,
        secret: row.try_get("secret")?,
        scope: scope_from(row.try_get::<Option<String>, _>("source_ids")?.as_deref())?,
        created_at: codec::time(row.try_get("created_at")?)?,
    })
}

fn attempt_from_row(row: &SqliteRow) -> StoreResult<DeliveryAttempt> {
    let status_code = row
        .try_get::<Option<i64>, _>("status_code")?
        .map(|code| {
            u16::try_from(code)
                .map_err(|_| StoreError::Corrupt(format!("HTTP status {code} out of range")))
        })
        .transpose()?;
    Ok(DeliveryAttempt {
        sequence: codec::count(row.try_get("seq")?),
        event_id: codec::id(&row.try_get::<String, _>("event_id")?)?,
        webhook_id: codec::id(&row.try_get::<String, _>("webhook_id")?)?,
        event: event_from(&row.try_get::<String, _>("event")?)?,
        attempted_at: codec::time(row.try_get("attempted_at")?)?,
        status_code,
        error: row.try_get("error")?,
        latency_ms: codec::count(row.try_get("latency_ms")?),
    })
}
