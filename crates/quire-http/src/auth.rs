//! Authentication and authorisation. A middleware turns the `Authorization: Bearer` header
//! into a [`Principal`] (or a 401); handlers then state the level they need in their signature
//! with [`Require`], so a permission check cannot be forgotten.

use std::marker::PhantomData;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Duration;
use quire_core::{ApiKeyRecord, Permission, SourceScope};

use crate::{ApiError, AppState};
use quire_app::keys::{hash_key, looks_like_key};

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The key used.
    pub key: ApiKeyRecord,
}

impl Principal {
    /// The sources the caller may see.
    pub fn scope(&self) -> &SourceScope {
        &self.key.scope
    }
}

/// A permission level a handler can require.
pub trait Level: Send + Sync + 'static {
    /// The level.
    const LEVEL: Permission;
}

/// Any valid key (`read` and above).
#[derive(Debug)]
pub struct Read;
/// `read-write` and above.
#[derive(Debug)]
pub struct ReadWrite;
/// `admin` only.
#[derive(Debug)]
pub struct Admin;

impl Level for Read {
    const LEVEL: Permission = Permission::Read;
}
impl Level for ReadWrite {
    const LEVEL: Permission = Permission::ReadWrite;
}
impl Level for Admin {
    const LEVEL: Permission = Permission::Admin;
}

/// Extracts the [`Principal`] and rejects it with 403 unless it has level `L`.
#[derive(Debug)]
pub struct Require<L: Level>(pub Principal, pub(crate) PhantomData<L>);

impl<S: Send + Sync, L: Level> FromRequestParts<S> for Require<L> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| ApiError::Unauthorized("missing API key".into()))?;
        if !principal.key.permission.allows(L::LEVEL) {
            return Err(ApiError::Forbidden(format!(
                "this operation needs a key with {} permission; this key has {}",
                L::LEVEL,
                principal.key.permission
            )));
        }
        Ok(Self(principal, PhantomData))
    }
}

/// Middleware for every `/api/v1/` route: authenticates the key, records its use, and adds the
/// `X-RateLimit-*` headers to responses that do not carry them yet.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let key = match find_key(&state, request.headers()).await {
        Ok(key) => key,
        Err(e) => return e.into_response(),
    };
    let now = state.clock.now();
    if key
        .last_used_at
        .is_none_or(|t| now - t > Duration::seconds(60))
        && let Err(e) = state.store.touch_key(key.id, now).await
    {
        tracing::warn!(error = %e, "could not record key use");
    }
    request
        .extensions_mut()
        .insert(Principal { key: key.clone() });
    let mut response = next.run(request).await;
    if !response.headers().contains_key("x-ratelimit-limit") {
        match state.limiter.peek(&key).await {
            Ok(limit) => crate::apply_headers(&limit, response.headers_mut()),
            Err(e) => tracing::warn!(error = %e, "could not read rate-limit window"),
        }
    }
    response
}

pub(crate) async fn find_key(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<ApiKeyRecord, ApiError> {
    let header = headers.get(AUTHORIZATION).ok_or_else(|| {
        ApiError::Unauthorized(
            "missing Authorization header; send `Authorization: Bearer <API key>`".into(),
        )
    })?;
    let value = header
        .to_str()
        .map_err(|_| ApiError::Unauthorized("malformed Authorization header".into()))?;
    let (scheme, secret) = value.trim().split_once(' ').ok_or_else(|| {
        ApiError::Unauthorized("malformed Authorization header; expected `Bearer <API key>`".into())
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::Unauthorized(
            "unsupported authorization scheme; expected `Bearer`".into(),
        ));
    }
    let secret = secret.trim();
    if !looks_like_key(secret) {
        return Err(ApiError::Unauthorized("malformed API key".into()));
    }
    let key = state
        .store
        .find_key_by_hash(&hash_key(secret))
        .await?
        .ok_or_else(|| ApiError::Unauthorized("invalid API key".into()))?;
    if key.revoked_at.is_some() {
        return Err(ApiError::Unauthorized(
            "this API key has been revoked".into(),
        ));
    }
    Ok(key)
}
