//! The generation queue all nodes of a cluster share (see `schema_v8.sql`). Every change runs
//! under one transaction-scoped advisory lock: joins take their place in arrival order, and
//! slots are handed out by one node at a time.

use chrono::{DateTime, Utc};
use quire_core::KeyId;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::codec;
use crate::{QueueLimits, QueueRefusal, QueueView, StoreResult, TicketPlace};

/// The advisory lock's key (the bytes of "quire-gq").
const LOCK_KEY: i64 = 0x7175_6972_652d_6771;

async fn lock(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK_KEY)
        .execute(conn)
        .await?;
    Ok(())
}

/// Removes the tickets of nodes that stopped renewing them.
async fn drop_stale(conn: &mut PgConnection, alive_since: DateTime<Utc>) -> StoreResult<()> {
    sqlx::query("DELETE FROM generation_tickets WHERE seen_at < $1")
        .bind(alive_since)
        .execute(conn)
        .await?;
    Ok(())
}

pub(super) async fn join(
    pool: &PgPool,
    id: Uuid,
    key: KeyId,
    node: &str,
    limits: QueueLimits,
    now: DateTime<Utc>,
    alive_since: DateTime<Utc>,
) -> StoreResult<Result<TicketPlace, QueueRefusal>> {
    let mut tx = pool.begin().await?;
    lock(&mut tx).await?;
    drop_stale(&mut tx, alive_since).await?;
    let row = sqlx::query(
        "SELECT COUNT(*) FILTER (WHERE running) AS running,
                COUNT(*) FILTER (WHERE NOT running) AS waiting,
                COUNT(*) FILTER (WHERE key_id = $1) AS of_key
         FROM generation_tickets",
    )
    .bind(key.0)
    .fetch_one(&mut *tx)
    .await?;
    let running = codec::count(row.try_get("running")?);
    let waiting = codec::count(row.try_get("waiting")?);
    let of_key = codec::count(row.try_get("of_key")?);
    let refusal = if of_key >= limits.max_per_key {
        Some(QueueRefusal::KeyShareUsed)
    } else if (running >= limits.slots || waiting > 0) && waiting >= limits.max_waiting {
        Some(QueueRefusal::LineFull)
    } else {
        None
    };
    if let Some(refusal) = refusal {
        tx.rollback().await?;
        return Ok(Err(refusal));
    }
    let place = if running < limits.slots && waiting == 0 {
        TicketPlace::Running
    } else {
        TicketPlace::Waiting(waiting + 1)
    };
    sqlx::query(
        "INSERT INTO generation_tickets (id, key_id, node, running, seen_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(key.0)
    .bind(node)
    .bind(place == TicketPlace::Running)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Ok(place))
}

pub(super) async fn view(
    pool: &PgPool,
    node: &str,
    slots: u64,
    now: DateTime<Utc>,
    alive_since: DateTime<Utc>,
) -> StoreResult<QueueView> {
    let mut tx = pool.begin().await?;
    lock(&mut tx).await?;
    sqlx::query("UPDATE generation_tickets SET seen_at = $2 WHERE node = $1")
        .bind(node)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    drop_stale(&mut tx, alive_since).await?;
    // Free slots go to the head of the line, whichever node its questions came through.
    sqlx::query(
        "UPDATE generation_tickets SET running = TRUE
         WHERE id IN (
             SELECT id FROM generation_tickets WHERE NOT running ORDER BY seq
             LIMIT GREATEST(0, $1 - (SELECT COUNT(*) FROM generation_tickets WHERE running)))",
    )
    .bind(codec::limit(slots))
    .execute(&mut *tx)
    .await?;
    let rows = sqlx::query("SELECT id, node, running FROM generation_tickets ORDER BY seq")
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    let mut view = QueueView::default();
    for row in rows {
        let place = if row.try_get("running")? {
            view.running += 1;
            TicketPlace::Running
        } else {
            view.waiting += 1;
            TicketPlace::Waiting(view.waiting)
        };
        if row.try_get::<&str, _>("node")? == node {
            view.places.push((row.try_get("id")?, place));
        }
    }
    Ok(view)
}

pub(super) async fn leave(pool: &PgPool, id: Uuid) -> StoreResult<()> {
    sqlx::query("DELETE FROM generation_tickets WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}
