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
use quire_app::Actor;
use quire_core::{ApiKeyRecord, Permission, SourceScope};

use crate::{ApiError, AppState};

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

    /// The caller as the use cases that change state name it (and record it in the audit
    /// log).
    pub fn actor(&self) -> Actor {
        Actor::key(&self.key)
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
        quire_app::auth::require(&principal.key, L::LEVEL)?;
        Ok(Self(principal, PhantomData))
    }
}

/// Middleware for every `/api/v1/` route: authenticates the key (recording its use, see
/// `quire_app::auth`), and adds the `X-RateLimit-*` headers to responses that do not carry
/// them yet.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    let key = match quire_app::auth::authenticate(&state, header).await {
        Ok(key) => key,
        Err(e) => return ApiError::from(e).into_response(),
    };
    request
        .extensions_mut()
        .insert(Principal { key: key.clone() });
    let mut response = next.run(request).await;
    if !response.headers().contains_key("x-ratelimit-limit") {
        match state.limiter().peek(&key).await {
            Ok(limit) => crate::apply_headers(&limit, response.headers_mut()),
            Err(e) => tracing::warn!(error = %e, "could not read rate-limit window"),
        }
    }
    response
}

/// The key of a request's `Authorization` header, without recording its use.
pub(crate) async fn find_key(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<ApiKeyRecord, ApiError> {
    let header = headers.get(AUTHORIZATION).map(|v| v.as_bytes());
    Ok(quire_app::auth::find_key(state, header).await?)
}
