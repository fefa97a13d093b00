//! API keys: issued, listed and revoked by administrators (the admin interface and the CLI),
//! and recognised by every adapter that authenticates a request. A key is `qk_` followed by 48
//! hex digits (192 random bits); only its SHA-256 is stored. A fast hash is enough because the
//! secret is random, not chosen by a person, so it cannot be guessed from a dictionary.

use quire_core::{ApiKeyRecord, KeyId, NewApiKey, Permission, Secret, SourceScope};

use crate::{Actor, AppError, Ledger, audit};
use sha2::{Digest, Sha256};

const PREFIX: &str = "qk_";
const RANDOM_BYTES: usize = 24;

/// What a new key should be.
#[derive(Debug, Clone)]
pub struct KeySpec {
    /// Free label.
    pub name: String,
    /// Permission level.
    pub permission: Permission,
    /// Source scope.
    pub scope: SourceScope,
    /// Per-key requests per minute, overriding the defaults.
    pub rate_limit: Option<u32>,
}

/// Creates and stores a key and records it in the audit log; the secret is returned once and
/// never again. A scope naming a source that does not exist is [`AppError::Invalid`].
pub async fn create(
    ledger: &Ledger,
    actor: &Actor,
    spec: KeySpec,
) -> Result<(ApiKeyRecord, Secret<String>), AppError> {
    let mut bytes = [0u8; RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| AppError::internal(&format!("no randomness: {e}")))?;
    let secret = format!("{PREFIX}{}", hex::encode(bytes));
    let record = ledger
        .store()
        .create_key(NewApiKey {
            id: KeyId::new(),
            name: spec.name,
            permission: spec.permission,
            scope: spec.scope,
            rate_limit: spec.rate_limit,
            key_hash: hash_key(&secret),
            created_at: ledger.now(),
        })
        .await?;
    audit::record(
        ledger,
        actor,
        "key.created",
        format!(
            "{} ({}), {}, {}",
            record.name,
            record.id,
            record.permission,
            describe_scope(&record.scope)
        ),
    )
    .await?;
    Ok((record, Secret::new(secret)))
}

/// Every key, revoked ones included, oldest first.
pub async fn list(ledger: &Ledger) -> Result<Vec<ApiKeyRecord>, AppError> {
    Ok(ledger.store().list_keys().await?)
}

/// Revokes key `id` (at once: every later request with it is refused) and records it in the
/// audit log; the key as it now is. [`AppError::NotFound`] when there is no such key.
pub async fn revoke(ledger: &Ledger, actor: &Actor, id: KeyId) -> Result<ApiKeyRecord, AppError> {
    let key = ledger
        .store()
        .revoke_key(id, ledger.now())
        .await?
        .ok_or_else(|| AppError::NotFound(format!("no API key with id {id}")))?;
    audit::record(
        ledger,
        actor,
        "key.revoked",
        format!("{} ({})", key.name, key.id),
    )
    .await?;
    Ok(key)
}

/// How the audit log and listings describe a scope.
pub fn describe_scope(scope: &SourceScope) -> String {
    match scope {
        SourceScope::All => "all sources".into(),
        SourceScope::Only(ids) => format!("{} source(s)", ids.len()),
    }
}

/// The stored form of a key.
pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// True when `secret` has the shape of a Quire key (checked before any lookup).
pub fn looks_like_key(secret: &str) -> bool {
    secret.strip_prefix(PREFIX).is_some_and(|rest| {
        rest.len() == RANDOM_BYTES * 2 && rest.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_shape() {
        assert!(looks_like_key(&format!("qk_{}", "ab".repeat(24))));
        assert!(!looks_like_key(&format!("qk_{}", "ab".repeat(23))));
        assert!(!looks_like_key(&format!("xx_{}", "ab".repeat(24))));
        assert!(!looks_like_key(&format!("qk_{}", "zz".repeat(24))));
    }

    #[test]
    fn hashes_are_stable_hex() {
        assert_eq!(hash_key("qk_x").len(), 64);
        assert_eq!(hash_key("qk_x"), hash_key("qk_x"));
        assert_ne!(hash_key("qk_x"), hash_key("qk_y"));
    }
}
