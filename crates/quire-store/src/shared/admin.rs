//! The admin web interface's state: its password hash, sign-in sessions and the audit log,
//! plus the counts its dashboard shows.

use chrono::{DateTime, Utc};
use quire_core::{DocumentRecord, DocumentStatus};

use super::Backend;
use super::records::{self, DOCUMENT_COLUMNS};
use super::sql::{Cells, Query, Sql};
use crate::{AdminSession, AuditEntry, StoreResult};

/// [`crate::Store::admin_password_hash`].
pub(crate) async fn password_hash<B: Backend>(store: &B) -> StoreResult<Option<String>> {
    let query = Query::new("SELECT hash FROM admin_password WHERE id = 1");
    match store.read().await?.fetch_optional(query).await? {
        Some(row) => row.text("hash").map(Some),
        None => Ok(None),
    }
}

/// [`crate::Store::set_admin_password_hash`].
pub(crate) async fn set_password_hash<B: Backend>(
    store: &B,
    hash: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut tx = store.begin_write().await?;
    tx.execute(
        Query::new(
            "INSERT INTO admin_password (id, hash, changed_at) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, changed_at = excluded.changed_at",
        )
        .bind(hash)
        .bind(now),
    )
    .await?;
    // Whoever knew the old password must not stay signed in.
    tx.execute(Query::new("DELETE FROM admin_sessions")).await?;
    tx.commit().await?;
    Ok(())
}

/// [`crate::Store::create_admin_session`].
pub(crate) async fn create_session<B: Backend>(
    store: &B,
    token_hash: &str,
    csrf: &str,
    expires_at: DateTime<Utc>,
) -> StoreResult<()> {
    let query =
        Query::new("INSERT INTO admin_sessions (token_hash, csrf, expires_at) VALUES ($1, $2, $3)")
            .bind(token_hash)
            .bind(csrf)
            .bind(expires_at);
    store.write().await?.execute(query).await?;
    Ok(())
}

/// [`crate::Store::admin_session`].
pub(crate) async fn session<B: Backend>(
    store: &B,
    token_hash: &str,
) -> StoreResult<Option<AdminSession>> {
    let query = Query::new("SELECT csrf, expires_at FROM admin_sessions WHERE token_hash = $1")
        .bind(token_hash);
    let Some(row) = store.read().await?.fetch_optional(query).await? else {
        return Ok(None);
    };
    Ok(Some(AdminSession {
        csrf: row.text("csrf")?,
        expires_at: row.time("expires_at")?,
    }))
}

/// [`crate::Store::delete_admin_session`].
pub(crate) async fn delete_session<B: Backend>(store: &B, token_hash: &str) -> StoreResult<bool> {
    let query = Query::new("DELETE FROM admin_sessions WHERE token_hash = $1").bind(token_hash);
    Ok(store.write().await?.execute(query).await? > 0)
}

/// [`crate::Store::prune_admin_sessions`].
pub(crate) async fn prune_sessions<B: Backend>(store: &B, now: DateTime<Utc>) -> StoreResult<u64> {
    let query = Query::new("DELETE FROM admin_sessions WHERE expires_at <= $1").bind(now);
    store.write().await?.execute(query).await
}

/// [`crate::Store::record_audit`].
pub(crate) async fn record_audit<B: Backend>(store: &B, entry: &AuditEntry) -> StoreResult<()> {
    let query =
        Query::new("INSERT INTO audit_log (at, actor, action, detail) VALUES ($1, $2, $3, $4)")
            .bind(entry.at)
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.detail);
    store.write().await?.execute(query).await?;
    Ok(())
}

/// [`crate::Store::audit_log`].
pub(crate) async fn audit_log<B: Backend>(store: &B, limit: u32) -> StoreResult<Vec<AuditEntry>> {
    let query = Query::new(format!(
        "SELECT at, actor, action, detail FROM audit_log ORDER BY at DESC, {} DESC LIMIT $1",
        B::SEQ
    ))
    .bind(limit);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::audit).collect()
}

/// [`crate::Store::document_status_counts`].
pub(crate) async fn document_counts<B: Backend>(
    store: &B,
) -> StoreResult<Vec<(DocumentStatus, u64)>> {
    let query = Query::new("SELECT status, COUNT(*) AS n FROM documents GROUP BY status");
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter()
        .map(|row| Ok((records::status(&row.text("status")?)?, row.count("n")?)))
        .collect()
}

/// [`crate::Store::recent_failures`].
pub(crate) async fn recent_failures<B: Backend>(
    store: &B,
    limit: u32,
) -> StoreResult<Vec<DocumentRecord>> {
    let query = Query::new(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.status = 'failed'
         ORDER BY d.updated_at DESC, d.{} DESC LIMIT $1",
        B::SEQ
    ))
    .bind(limit);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::document).collect()
}
