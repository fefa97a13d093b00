//! Issuing API keys (the admin interface and the CLI), and recognising them (every adapter that
//! authenticates a request). A key is `qk_` followed by 48 hex digits (192 random bits); only its
//! SHA-256 is stored. A fast hash is enough because the secret is random, not chosen by a
//! person, so it cannot be guessed from a dictionary.

use quire_core::{ApiKeyRecord, Clock, KeyId, NewApiKey, Permission, Secret, SourceScope};
use quire_store::Store;

use crate::AppError;
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

/// Creates and stores a key; the secret is returned once and never again. A scope naming a
/// source that does not exist is [`AppError::Invalid`].
pub async fn issue_key(
    store: &dyn Store,
    clock: &dyn Clock,
    spec: KeySpec,
) -> Result<(ApiKeyRecord, Secret<String>), AppError> {
    let mut bytes = [0u8; RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| AppError::internal(&format!("no randomness: {e}")))?;
    let secret = format!("{PREFIX}{}", hex::encode(bytes));
    let record = store
        .create_key(NewApiKey {
            id: KeyId::new(),
            name: spec.name,
            permission: spec.permission,
            scope: spec.scope,
            rate_limit: spec.rate_limit,
            key_hash: hash_key(&secret),
            created_at: clock.now(),
        })
        .await?;
    Ok((record, Secret::new(secret)))
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
