//! The audit log: every use case that changes state appends an entry naming who acted, and the
//! admin interface reads the newest ones.

use crate::records::AuditEntry;
use crate::{Actor, AppError, Ledger};

/// Appends `action` (a stable name such as `key.created`) by `actor`, with `detail` (never a
/// secret), at the service's current time.
pub async fn record(
    ledger: &Ledger,
    actor: &Actor,
    action: &str,
    detail: String,
) -> Result<(), AppError> {
    ledger
        .store()
        .record_audit(AuditEntry {
            at: ledger.now(),
            actor: actor.to_string(),
            action: action.to_owned(),
            detail,
        })
        .await?;
    Ok(())
}

/// The newest `limit` entries, newest first.
pub async fn recent(ledger: &Ledger, limit: u32) -> Result<Vec<AuditEntry>, AppError> {
    Ok(ledger.store().audit_log(limit).await?)
}
