//! The admin web interface's state: its password hash, sign-in sessions and the audit log,
//! plus the counts its dashboard shows.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use quire_core::{DocumentRecord, DocumentStatus};
use sqlx::{PgPool, Row};

use super::codec::{self, DOCUMENT_COLUMNS};
use crate::{AdminSession, AuditEntry, StoreError, StoreResult};

pub(super) async fn password_hash(pool: &PgPool) -> StoreResult<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT hash FROM admin_password WHERE id = 1")
            .fetch_optional(pool)
            .await?,
    )
}

pub(super) async fn set_password_hash(
    pool: &PgPool,
    hash: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO admin_password (id, hash, changed_at) VALUES (1, $1, $2)
         ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, changed_at = excluded.changed_at",
    )
    .bind(hash)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    // Whoever knew the old password must not stay signed in.
    sqlx::query("DELETE FROM admin_sessions")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn create_session(
    pool: &PgPool,
    token_hash: &str,
    csrf: &str,
    expires_at: DateTime<Utc>,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO admin_sessions (token_hash, csrf, expires_at) VALUES ($1, $2, $3)")
        .bind(token_hash)
        .bind(csrf)
        .bind(expires_at)
        .execute(pool)
        .await?;
    Ok(())
}

pub(super) async fn session(pool: &PgPool, token_hash: &str) -> StoreResult<Option<AdminSession>> {
    let Some(row) =
        sqlx::query("SELECT csrf, expires_at FROM admin_sessions WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(pool)
            .await?
    else {
        return Ok(None);
    };
    Ok(Some(AdminSession {
        csrf: row.try_get("csrf")?,
        expires_at: row.try_get("expires_at")?,
    }))
}

pub(super) async fn delete_session(pool: &PgPool, token_hash: &str) -> StoreResult<bool> {
    Ok(
        sqlx::query("DELETE FROM admin_sessions WHERE token_hash = $1")
            .bind(token_hash)
            .execute(pool)
            .await?
            .rows_affected()
            > 0,
    )
}

pub(super) async fn prune_sessions(pool: &PgPool, now: DateTime<Utc>) -> StoreResult<u64> {
    Ok(
        sqlx::query("DELETE FROM admin_sessions WHERE expires_at <= $1")
            .bind(now)
            .execute(pool)
            .await?
            .rows_affected(),
    )
}

pub(super) async fn record_audit(pool: &PgPool, entry: &AuditEntry) -> StoreResult<()> {
    sqlx::query("INSERT INTO audit_log (at, action, detail) VALUES ($1, $2, $3)")
        .bind(entry.at)
        .bind(&entry.action)
        .bind(&entry.detail)
        .execute(pool)
        .await?;
    Ok(())
}

pub(super) async fn audit_log(pool: &PgPool, limit: u32) -> StoreResult<Vec<AuditEntry>> {
    let rows =
        sqlx::query("SELECT at, action, detail FROM audit_log ORDER BY at DESC, seq DESC LIMIT $1")
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
    rows.iter()
        .map(|row| {
            Ok(AuditEntry {
                at: row.try_get("at")?,
                action: row.try_get("action")?,
                detail: row.try_get("detail")?,
            })
        })
        .collect()
}

pub(super) async fn document_counts(pool: &PgPool) -> StoreResult<Vec<(DocumentStatus, u64)>> {
    let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM documents GROUP BY status")
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|row| {
            let status: String = row.try_get("status")?;
            Ok((
                DocumentStatus::from_str(&status).map_err(StoreError::Corrupt)?,
                codec::count(row.try_get("n")?),
            ))
        })
        .collect()
}

pub(super) async fn recent_failures(pool: &PgPool, limit: u32) -> StoreResult<Vec<DocumentRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.status = 'failed'
         ORDER BY d.updated_at DESC, d.seq DESC LIMIT $1"
    ))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter().map(codec::document_from_row).collect()
}
