//! The sign-in form's token, bound to the server that issued it. Before a session exists the
//! form cannot carry a session's token, and a double-submit cookie alone proves only that the
//! cookie and the field agree, not that this server handed them out. So the token is a random
//! nonce and an expiry, signed with HMAC-SHA256 under a key derived from the stored admin
//! password hash: a secret that never leaves the store, shared by every node of a cluster
//! (no per-node state to look up), and replaced with the password, which voids every token
//! issued before.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::AdminError;
use crate::session::new_token;

/// How long a sign-in form stays usable, in seconds (as long as its cookie lives).
pub(crate) const LIFETIME_SECONDS: i64 = 3600;

/// What the signing key is derived for, so the password hash is never used as a key as it is.
const KEY_PURPOSE: &[u8] = b"quire admin sign-in form token v1";

fn mac(password_hash: &str) -> Hmac<Sha256> {
    let key = Sha256::new()
        .chain_update(KEY_PURPOSE)
        .chain_update(password_hash.as_bytes())
        .finalize();
    Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes a key of any length")
}

/// A new token, `nonce.expiry.signature`, valid for [`LIFETIME_SECONDS`] from `now`.
pub(crate) fn issue(password_hash: &str, now: DateTime<Utc>) -> Result<String, AdminError> {
    let payload = format!("{}.{}", new_token()?, now.timestamp() + LIFETIME_SECONDS);
    let signature = mac(password_hash)
        .chain_update(payload.as_bytes())
        .finalize()
        .into_bytes();
    Ok(format!("{payload}.{}", hex::encode(signature)))
}

/// Whether `token` was issued under `password_hash` and has not expired at `now`. The
/// signature is compared in constant time.
pub(crate) fn is_valid(password_hash: &str, token: &str, now: DateTime<Utc>) -> bool {
    let Some((payload, signature)) = token.rsplit_once('.') else {
        return false;
    };
    let Some(expiry) = payload
        .split_once('.')
        .and_then(|(_, expiry)| expiry.parse::<i64>().ok())
    else {
        return false;
    };
    let Ok(signature) = hex::decode(signature) else {
        return false;
    };
    expiry > now.timestamp()
        && mac(password_hash)
            .chain_update(payload.as_bytes())
            .verify_slice(&signature)
            .is_ok()
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA";

    #[test]
    fn an_issued_token_is_valid_until_it_expires() {
        let now = Utc::now();
        let token = issue(HASH, now).unwrap();
        assert!(is_valid(HASH, &token, now));
        assert!(is_valid(
            HASH,
            &token,
            now + Duration::seconds(LIFETIME_SECONDS - 1)
        ));
        assert!(!is_valid(
            HASH,
            &token,
            now + Duration::seconds(LIFETIME_SECONDS)
        ));
    }

    #[test]
    fn a_token_not_issued_under_the_current_password_is_refused() {
        let now = Utc::now();
        let token = issue(HASH, now).unwrap();
        assert!(!is_valid("$argon2id$another", &token, now), "new password");
        // A later expiry with the old signature, an unsigned random value, garbage.
        let (payload, signature) = token.rsplit_once('.').unwrap();
        let (nonce, _) = payload.split_once('.').unwrap();
        let stretched = format!("{nonce}.{}.{signature}", now.timestamp() + 999_999);
        for forged in [stretched.as_str(), nonce, "", "a.b.c", "..", "x.1.zz"] {
            assert!(!is_valid(HASH, forged, now), "{forged:?}");
        }
    }
}
