//! The handlers, one module per page.

pub(crate) mod audit;
pub(crate) mod dashboard;
pub(crate) mod keys;
pub(crate) mod login;
pub(crate) mod other;
pub(crate) mod playground;
pub(crate) mod review;
pub(crate) mod sources;
pub(crate) mod webhooks;

use quire_store::AuditEntry;

use crate::{AdminError, AdminState};

/// Appends to the audit log at the service's current time.
pub(crate) async fn audit(
    state: &AdminState,
    action: &str,
    detail: String,
) -> Result<(), AdminError> {
    state
        .app
        .store
        .record_audit(AuditEntry {
            at: state.app.clock.now(),
            action: action.into(),
            detail,
        })
        .await?;
    Ok(())
}
