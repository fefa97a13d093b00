//! Sources that sync: their origin settings, their runs (at most one running per source, which
//! a unique index guarantees across processes and nodes) and the fingerprints of the items
//! last taken.

use chrono::{DateTime, Utc};
use quire_core::{NewSource, SourceId, SourceRecord, WebhookEvent, wire_timestamp};
use serde_json::{Map, Value, json};

use super::backend::Conn;
use super::sql::{Cells, Query, Sql};
use super::{Backend, sources, webhooks};
use crate::{NewSync, SourceSync, StoreError, StoreResult, SyncCounts, SyncRun};

/// [`crate::Store::create_syncing_source`].
pub(crate) async fn create_source<B: Backend>(
    store: &B,
    source: NewSource,
    sync: NewSync,
) -> StoreResult<SourceRecord> {
    let mut tx = store.begin_write().await?;
    let record = sources::insert::<B>(&mut *tx, &source).await?;
    tx.execute(
        Query::new(
            "INSERT INTO source_syncs (source_id, kind, config, sealed_secret, interval_seconds,
                                       next_run_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(source.id)
        .bind(sync.kind.as_str())
        .bind(sync.config.as_str())
        .bind(sync.sealed_secret.as_deref())
        .bind(sync.interval_seconds)
        .bind(sync.next_run_at),
    )
    .await?;
    tx.commit().await?;
    Ok(record)
}

/// [`crate::Store::source_sync`].
pub(crate) async fn get<B: Backend>(
    store: &B,
    source: SourceId,
) -> StoreResult<Option<SourceSync>> {
    let row = store
        .read()
        .await?
        .fetch_optional(
            Query::new(
                "SELECT source_id, kind, config, sealed_secret, interval_seconds, next_run_at
                 FROM source_syncs WHERE source_id = $1",
            )
            .bind(source),
        )
        .await?;
    row.map(|row| {
        Ok(SourceSync {
            source_id: row.id("source_id")?,
            kind: row.text("kind")?,
            config: row.text("config")?,
            sealed_secret: row.opt_text("sealed_secret")?,
            interval_seconds: row.count("interval_seconds")?,
            next_run_at: row.opt_time("next_run_at")?,
        })
    })
    .transpose()
}

/// [`crate::Store::start_sync_run`].
pub(crate) async fn start<B: Backend>(
    store: &B,
    source: SourceId,
    id: uuid::Uuid,
    node: &str,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<Option<SyncRun>> {
    let mut tx = store.begin_write().await?;
    let running = tx
        .exists(
            Query::new(format!(
                "SELECT 1 FROM sync_runs WHERE source_id = $1 AND status = 'running' {}",
                B::lock("FOR UPDATE")
            ))
            .bind(source),
        )
        .await?;
    if running {
        tx.rollback().await?;
        return Ok(None);
    }
    // Two starts at once on two nodes: the unique index lets one in; the other sees a conflict.
    let inserted = tx
        .execute(
            Query::new(
                "INSERT INTO sync_runs (id, source_id, node, status, started_at, lease_until)
                 VALUES ($1, $2, $3, 'running', $4, $5)",
            )
            .bind(id)
            .bind(source)
            .bind(node)
            .bind(now)
            .bind(lease_until),
        )
        .await;
    match inserted {
        Ok(_) => {}
        Err(StoreError::Database(e)) if is_unique_violation(&e) => {
            tx.rollback().await?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    }
    tx.commit().await?;
    Ok(Some(SyncRun {
        id,
        source_id: source,
        status: "running".into(),
        counts: SyncCounts::default(),
        failures: "[]".into(),
        error: None,
        started_at: now,
        finished_at: None,
    }))
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|db| db.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

/// [`crate::Store::update_source_sync`].
pub(crate) async fn update<B: Backend>(
    store: &B,
    source: SourceId,
    sync: NewSync,
) -> StoreResult<bool> {
    let changed = store
        .write()
        .await?
        .execute(
            Query::new(
                "UPDATE source_syncs SET config = $1, sealed_secret = $2, interval_seconds = $3,
                                         next_run_at = $4
                 WHERE source_id = $5 AND kind = $6",
            )
            .bind(sync.config.as_str())
            .bind(sync.sealed_secret.as_deref())
            .bind(sync.interval_seconds)
            .bind(sync.next_run_at)
            .bind(source)
            .bind(sync.kind.as_str()),
        )
        .await?;
    Ok(changed == 1)
}

/// [`crate::Store::renew_sync_run`].
pub(crate) async fn renew<B: Backend>(
    store: &B,
    id: uuid::Uuid,
    lease_until: DateTime<Utc>,
) -> StoreResult<bool> {
    let changed = store
        .write()
        .await?
        .execute(
            Query::new(
                "UPDATE sync_runs SET lease_until = $1 WHERE id = $2 AND status = 'running'",
            )
            .bind(lease_until)
            .bind(id),
        )
        .await?;
    Ok(changed == 1)
}

/// [`crate::Store::finish_sync_run`].
pub(crate) async fn finish<B: Backend>(
    store: &B,
    run: &SyncRun,
    next_run_at: Option<DateTime<Utc>>,
) -> StoreResult<bool> {
    let mut tx = store.begin_write().await?;
    let ended = tx
        .execute(
            Query::new(
                "UPDATE sync_runs SET status = $1, added = $2, updated = $3, deleted = $4,
                                  unchanged = $5, failed = $6, failures = $7, error = $8,
                                  finished_at = $9, lease_until = NULL
             WHERE id = $10 AND status = 'running'",
            )
            .bind(run.status.as_str())
            .bind(run.counts.added)
            .bind(run.counts.updated)
            .bind(run.counts.deleted)
            .bind(run.counts.unchanged)
            .bind(run.counts.failed)
            .bind(run.failures.as_str())
            .bind(run.error.as_deref())
            .bind(run.finished_at)
            .bind(run.id),
        )
        .await?;
    if ended == 0 {
        // Ended already: its lease ran out and another node recorded it as interrupted.
        tx.rollback().await?;
        return Ok(false);
    }
    tx.execute(
        Query::new("UPDATE source_syncs SET next_run_at = $1 WHERE source_id = $2")
            .bind(next_run_at)
            .bind(run.source_id),
    )
    .await?;
    announce::<B>(&mut tx, run).await?;
    tx.commit().await?;
    Ok(true)
}

/// Queues `source.synced` for `run`, which has just ended, in the transaction that records its
/// end: a crash can neither lose the event nor send it for a run that was not recorded.
async fn announce<B: Backend>(tx: &mut Conn<B>, run: &SyncRun) -> StoreResult<()> {
    let source_name = tx
        .fetch_optional(Query::new("SELECT name FROM sources WHERE id = $1").bind(run.source_id))
        .await?
        .map(|row| row.text("name"))
        .transpose()?;
    if let Some(source_name) = source_name {
        let at = run.finished_at.unwrap_or(run.started_at);
        webhooks::enqueue_for_source::<B>(
            &mut *tx,
            run.source_id,
            WebhookEvent::SourceSynced,
            synced_data(run, &source_name),
            at,
        )
        .await?;
    }
    Ok(())
}

/// The `data` of `source.synced`: the source and the run as `GET …/syncs` shows it.
fn synced_data(run: &SyncRun, source_name: &str) -> Map<String, Value> {
    let failures: Value = serde_json::from_str(&run.failures).unwrap_or_else(|_| json!([]));
    let data = json!({
        "dataSourceId": run.source_id.to_string(),
        "dataSourceName": source_name,
        "run": {
            "id": run.id.to_string(),
            "status": run.status,
            "added": run.counts.added,
            "updated": run.counts.updated,
            "deleted": run.counts.deleted,
            "unchanged": run.counts.unchanged,
            "failed": run.counts.failed,
            "failures": failures,
            "error": run.error,
            "startedAt": wire_timestamp(run.started_at),
            "finishedAt": run.finished_at.map(wire_timestamp),
        },
    });
    match data {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The columns of a run, for [`run`].
const RUN_COLUMNS: &str = "id, source_id, status, added, updated, deleted, unchanged, failed, \
     failures, error, started_at, finished_at";

fn run(row: &impl Cells) -> StoreResult<SyncRun> {
    Ok(SyncRun {
        id: row.uuid("id")?,
        source_id: row.id("source_id")?,
        status: row.text("status")?,
        counts: SyncCounts {
            added: row.count("added")?,
            updated: row.count("updated")?,
            deleted: row.count("deleted")?,
            unchanged: row.count("unchanged")?,
            failed: row.count("failed")?,
        },
        failures: row.text("failures")?,
        error: row.opt_text("error")?,
        started_at: row.time("started_at")?,
        finished_at: row.opt_time("finished_at")?,
    })
}

/// [`crate::Store::sync_runs`].
pub(crate) async fn runs<B: Backend>(
    store: &B,
    source: SourceId,
    limit: u32,
) -> StoreResult<Vec<SyncRun>> {
    let rows = store
        .read()
        .await?
        .fetch_all(
            Query::new(format!(
                "SELECT {RUN_COLUMNS} FROM sync_runs WHERE source_id = $1
                 ORDER BY started_at DESC, {} DESC LIMIT $2",
                B::SEQ
            ))
            .bind(source)
            .bind(limit),
        )
        .await?;
    rows.iter().map(run).collect()
}

/// [`crate::Store::due_syncs`].
pub(crate) async fn due<B: Backend>(store: &B, now: DateTime<Utc>) -> StoreResult<Vec<SourceId>> {
    let rows = store
        .read()
        .await?
        .fetch_all(
            Query::new(
                "SELECT s.source_id FROM source_syncs s
                 WHERE s.next_run_at IS NOT NULL AND s.next_run_at <= $1
                   AND NOT EXISTS (SELECT 1 FROM sync_runs r
                                   WHERE r.source_id = s.source_id AND r.status = 'running')
                 ORDER BY s.next_run_at",
            )
            .bind(now),
        )
        .await?;
    rows.iter().map(|row| row.id("source_id")).collect()
}

/// [`crate::Store::fail_interrupted_sync_runs`].
pub(crate) async fn fail_interrupted<B: Backend>(
    store: &B,
    node_prefix: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    fail_where(
        store,
        "(CAST($1 AS TEXT) IS NULL
          OR substr(node, 1, length(CAST($1 AS TEXT))) = CAST($1 AS TEXT))",
        |q: Query| q.bind(node_prefix),
        "interrupted: the server stopped during the run",
        now,
    )
    .await
}

/// [`crate::Store::fail_expired_sync_runs`].
pub(crate) async fn fail_expired<B: Backend>(store: &B, now: DateTime<Utc>) -> StoreResult<u64> {
    fail_where(
        store,
        "lease_until < $1",
        |q: Query| q.bind(now),
        "interrupted: the node running it stopped renewing its lease (it stopped or lost the \
         database)",
        now,
    )
    .await
}

/// Ends as failed, with `error`, every running run that `condition` (over `sync_runs`, its
/// one parameter bound by `bind`) picks, and announces each, in one transaction.
async fn fail_where<B: Backend>(
    store: &B,
    condition: &str,
    bind: impl Fn(Query) -> Query,
    error: &str,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    // The schedulers ask every few seconds and there is seldom anything to end: a read says
    // so without taking the write lock (SQLite's is the whole database's).
    let any = store
        .read()
        .await?
        .exists(bind(Query::new(format!(
            "SELECT 1 FROM sync_runs WHERE status = 'running' AND {condition}"
        ))))
        .await?;
    if !any {
        return Ok(0);
    }
    let mut tx = store.begin_write().await?;
    let rows = tx
        .fetch_all(bind(Query::new(format!(
            "SELECT {RUN_COLUMNS} FROM sync_runs WHERE status = 'running' AND {condition} {}",
            B::lock("FOR UPDATE")
        ))))
        .await?;
    let mut failed = 0;
    for row in &rows {
        let mut ended = run(row)?;
        ended.status = "failed".into();
        ended.error = Some(error.into());
        ended.finished_at = Some(now);
        tx.execute(
            Query::new(
                "UPDATE sync_runs SET status = 'failed', error = $1, finished_at = $2,
                                      lease_until = NULL
                 WHERE id = $3",
            )
            .bind(error)
            .bind(now)
            .bind(ended.id),
        )
        .await?;
        announce::<B>(&mut tx, &ended).await?;
        failed += 1;
    }
    tx.commit().await?;
    Ok(failed)
}

/// [`crate::Store::sync_items`].
pub(crate) async fn items<B: Backend>(
    store: &B,
    source: SourceId,
) -> StoreResult<Vec<(String, String)>> {
    let rows = store
        .read()
        .await?
        .fetch_all(
            Query::new(
                "SELECT external_id, fingerprint FROM sync_items WHERE source_id = $1
                 ORDER BY external_id",
            )
            .bind(source),
        )
        .await?;
    rows.iter()
        .map(|row| Ok((row.text("external_id")?, row.text("fingerprint")?)))
        .collect()
}

/// [`crate::Store::set_sync_item`]: `None` forgets the item.
pub(crate) async fn set_item<B: Backend>(
    store: &B,
    source: SourceId,
    external_id: &str,
    fingerprint: Option<&str>,
) -> StoreResult<()> {
    let mut conn = store.write().await?;
    match fingerprint {
        Some(fingerprint) => {
            conn.execute(
                Query::new(
                    "INSERT INTO sync_items (source_id, external_id, fingerprint)
                     VALUES ($1, $2, $3)
                     ON CONFLICT (source_id, external_id) DO UPDATE
                     SET fingerprint = excluded.fingerprint",
                )
                .bind(source)
                .bind(external_id)
                .bind(fingerprint),
            )
            .await?
        }
        None => {
            conn.execute(
                Query::new("DELETE FROM sync_items WHERE source_id = $1 AND external_id = $2")
                    .bind(source)
                    .bind(external_id),
            )
            .await?
        }
    };
    Ok(())
}
