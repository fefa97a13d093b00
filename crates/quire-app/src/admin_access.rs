//! The admin interface's access: its one password (stored as a hash the admin crate makes)
//! and its sign-in sessions (stored as hashes of their tokens). Setting the password and
//! signing in and out are recorded in the audit log here, whichever adapter does them (the
//! web interface, `quire admin set-password`, or the server's start with
//! `QUIRE_ADMIN_PASSWORD`).

use chrono::{DateTime, Utc};

use crate::records::AdminSession;
use crate::{Actor, AppError, Ledger, audit};

/// The stored password hash, if a password was ever set.
pub async fn password_hash(ledger: &Ledger) -> Result<Option<String>, AppError> {
    Ok(ledger.store().admin_password_hash().await?)
}

/// Stores a new password hash (which ends every session) and records it with `how` as the
/// detail, such as "set from the command line".
pub async fn set_password_hash(
    ledger: &Ledger,
    actor: &Actor,
    hash: &str,
    how: &str,
) -> Result<(), AppError> {
    ledger
        .store()
        .set_admin_password_hash(hash, ledger.now())
        .await?;
    audit::record(ledger, actor, "admin.password_set", how.to_owned()).await
}

/// Starts a session whose token hashes to `token_hash`, with its CSRF token, until
/// `expires_at`; expired sessions are pruned first. Records the sign-in from `from` (the
/// client's address).
pub async fn start_session(
    ledger: &Ledger,
    token_hash: &str,
    csrf: &str,
    expires_at: DateTime<Utc>,
    from: &str,
) -> Result<(), AppError> {
    let store = ledger.store();
    store.prune_admin_sessions(ledger.now()).await?;
    store
        .create_admin_session(token_hash, csrf, expires_at)
        .await?;
    audit::record(
        ledger,
        &Actor::Admin,
        "admin.signed_in",
        format!("from {from}"),
    )
    .await
}

/// The session whose token hashes to `token_hash`, unless it has ended.
pub async fn session(ledger: &Ledger, token_hash: &str) -> Result<Option<AdminSession>, AppError> {
    let session = ledger.store().admin_session(token_hash).await?;
    Ok(session.filter(|s| s.expires_at > ledger.now()))
}

/// Ends the session whose token hashes to `token_hash` and records the sign-out.
pub async fn end_session(ledger: &Ledger, token_hash: &str) -> Result<(), AppError> {
    ledger.store().delete_admin_session(token_hash).await?;
    audit::record(ledger, &Actor::Admin, "admin.signed_out", String::new()).await
}

/// Records a wrong password from `from` (the client's address).
pub async fn sign_in_failed(ledger: &Ledger, from: &str) -> Result<(), AppError> {
    audit::record(
        ledger,
        &Actor::Admin,
        "admin.sign_in_failed",
        format!("wrong password from {from}"),
    )
    .await
}
