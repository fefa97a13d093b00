//! Who is calling: an `Authorization: Bearer <key>` header value turned into the key's record,
//! and the permission check every operation makes. Shared by every adapter that takes API keys
//! (the REST API and the MCP server), so a key is recognised, refused and recorded the same way
//! whichever door it comes through.

use chrono::Duration;
use quire_core::{ApiKeyRecord, Permission};

use crate::keys::{hash_key, looks_like_key};
use crate::{AppError, Services};

/// How stale a key's `last_used_at` may get before a request writes it again: one write a
/// minute per busy key instead of one per request.
const TOUCH_INTERVAL_SECONDS: i64 = 60;

/// The key named by the raw `Authorization` header value (`None` when the header is absent),
/// if it exists and is not revoked; [`AppError::Unauthorized`] otherwise, with a message that
/// says what to send. Records the key's use (at most once a minute). Called on every request:
/// a key revoked a moment ago is refused at its next call.
pub async fn authenticate(
    services: &Services,
    authorization: Option<&[u8]>,
) -> Result<ApiKeyRecord, AppError> {
    let key = find_key(services, authorization).await?;
    let now = services.clock.now();
    if key
        .last_used_at
        .is_none_or(|t| now - t > Duration::seconds(TOUCH_INTERVAL_SECONDS))
        && let Err(e) = services.store.touch_key(key.id, now).await
    {
        // Bookkeeping only: the request goes on.
        tracing::warn!(error = %e, "could not record key use");
    }
    Ok(key)
}

/// Like [`authenticate`] without recording the use (for answers that only need to know
/// whether a key would be accepted).
pub async fn find_key(
    services: &Services,
    authorization: Option<&[u8]>,
) -> Result<ApiKeyRecord, AppError> {
    let unauthorized = |m: &str| AppError::Unauthorized(m.to_owned());
    let header = authorization.ok_or_else(|| {
        unauthorized("missing Authorization header; send `Authorization: Bearer <API key>`")
    })?;
    let value =
        std::str::from_utf8(header).map_err(|_| unauthorized("malformed Authorization header"))?;
    let (scheme, secret) = value.trim().split_once(' ').ok_or_else(|| {
        unauthorized("malformed Authorization header; expected `Bearer <API key>`")
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(unauthorized(
            "unsupported authorization scheme; expected `Bearer`",
        ));
    }
    let secret = secret.trim();
    if !looks_like_key(secret) {
        return Err(unauthorized("malformed API key"));
    }
    let key = services
        .store
        .find_key_by_hash(&hash_key(secret))
        .await?
        .ok_or_else(|| unauthorized("invalid API key"))?;
    if key.revoked_at.is_some() {
        return Err(unauthorized("this API key has been revoked"));
    }
    Ok(key)
}

/// [`AppError::Forbidden`] unless `key` has at least permission `needed`.
pub fn require(key: &ApiKeyRecord, needed: Permission) -> Result<(), AppError> {
    if key.permission.allows(needed) {
        Ok(())
    } else {
        Err(AppError::Forbidden(format!(
            "this operation needs a key with {needed} permission; this key has {}",
            key.permission
        )))
    }
}
