//! The admin password: Argon2id with the crate's default cost (19 MiB, 2 passes), stored as
//! a PHC string. Hashing runs on the blocking pool so it never stalls the async workers.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use quire_app::admin_access;
use quire_app::{Actor, Ledger};
use quire_core::Secret;

use crate::AdminError;

/// The shortest password accepted, in characters.
pub const MIN_PASSWORD_CHARS: usize = 10;

/// Why a new password was refused or could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// Too short to resist guessing.
    #[error("the password must be at least {MIN_PASSWORD_CHARS} characters long (it has {0})")]
    TooShort(usize),
    /// Hashing or storing failed.
    #[error(transparent)]
    Failed(#[from] AdminError),
}

/// Hashes `password` with Argon2id and a fresh 16-byte salt.
pub fn hash(password: &str) -> Result<String, AdminError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| AdminError::Randomness(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AdminError::Hashing(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AdminError::Hashing(e.to_string()))
}

/// True when `password` matches the stored PHC string; an unreadable hash is an error.
pub fn verify(password: &str, stored: &str) -> Result<bool, AdminError> {
    let parsed = PasswordHash::new(stored).map_err(|e| AdminError::Hashing(e.to_string()))?;
    match Argon2::default().verify_password(password.as_bytes(), &parsed) {
        Ok(()) => Ok(true),
        Err(argon2::password_hash::Error::Password) => Ok(false),
        Err(e) => Err(AdminError::Hashing(e.to_string())),
    }
}

/// Checks the length of a new password.
pub fn check_new(password: &str) -> Result<(), PasswordError> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        return Err(PasswordError::TooShort(chars));
    }
    Ok(())
}

/// Hashes on the blocking pool.
pub(crate) async fn hash_blocking(password: Secret<String>) -> Result<String, AdminError> {
    tokio::task::spawn_blocking(move || hash(password.expose()))
        .await
        .map_err(|e| AdminError::Hashing(e.to_string()))?
}

/// Checks on the blocking pool.
pub(crate) async fn verify_blocking(
    password: Secret<String>,
    stored: String,
) -> Result<bool, AdminError> {
    tokio::task::spawn_blocking(move || verify(password.expose(), &stored))
        .await
        .map_err(|e| AdminError::Hashing(e.to_string()))?
}

/// Sets the admin password (ending every session); `actor` and `how` (the detail, e.g. "set
/// from the command line") go to the audit log.
pub async fn set(
    ledger: &Ledger,
    actor: &Actor,
    password: Secret<String>,
    how: &str,
) -> Result<(), PasswordError> {
    check_new(password.expose())?;
    let hashed = hash_blocking(password).await?;
    admin_access::set_password_hash(ledger, actor, &hashed, how)
        .await
        .map_err(AdminError::from)?;
    Ok(())
}

/// At start: sets the password from `QUIRE_ADMIN_PASSWORD` when none is stored yet (as the
/// operator). Returns true when it did; a stored password is never replaced this way.
pub async fn set_initial(ledger: &Ledger, password: Secret<String>) -> Result<bool, PasswordError> {
    if admin_access::password_hash(ledger)
        .await
        .map_err(AdminError::from)?
        .is_some()
    {
        return Ok(false);
    }
    set(
        ledger,
        &Actor::Operator,
        password,
        "set from QUIRE_ADMIN_PASSWORD at start",
    )
    .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_salts_differ() {
        let a = hash("correct horse battery").unwrap();
        let b = hash("correct horse battery").unwrap();
        assert!(a.starts_with("$argon2id$"));
        assert_ne!(a, b);
        assert!(verify("correct horse battery", &a).unwrap());
        assert!(!verify("wrong horse battery", &a).unwrap());
        assert!(verify("x", "not a hash").is_err());
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(matches!(
            check_new("123456789"),
            Err(PasswordError::TooShort(9))
        ));
        assert!(check_new("1234567890").is_ok());
        // Characters, not bytes.
        assert!(matches!(
            check_new("ééééé"),
            Err(PasswordError::TooShort(5))
        ));
    }
}
