//! Quire's admin web interface under `/admin`: one password (Argon2id), cookie sessions with
//! per-session CSRF tokens, a sign-in throttle, and server-rendered pages (dashboard, API keys,
//! sources and documents, review queue, webhooks, search playground, audit log) that work without
//! JavaScript, written as maud templates so every value they show is escaped by default.
//!
//! Decisions (see also `docs/admin.md`):
//! - A session lasts 12 hours from sign-in, whatever the activity (absolute expiry; no write
//!   per request). Changing the password ends every session.
//! - The session cookie `quire_admin` is `HttpOnly; SameSite=Strict; Path=/admin`, plus
//!   `Secure` when the request came over TLS or with `X-Forwarded-Proto: https`. Only the
//!   SHA-256 of its 32 random bytes is stored.
//! - CSRF: every form of a session carries the session's token in `csrf`; the sign-in form,
//!   before any session exists, uses a double-submit token: a random `quire_admin_login`
//!   cookie (SameSite=Strict) that the form must repeat.
//! - Sign-in throttle (`throttle.rs`): 5 failed attempts within 15 minutes from one client
//!   address answer 429 until the oldest of them is 15 minutes old; each attempt is reserved
//!   before its password is verified, so parallel attempts get no more tries; at most two
//!   verifications run at once. 100 failures from all addresses together hold back every
//!   address that failed too, never one with a clean record. A new password (`quire admin
//!   set-password`, also while the server runs) clears every failure.

mod assets;
mod error;
mod html;
mod login_token;
mod pages;
pub mod password;
mod session;
mod throttle;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Response, header};
use axum::middleware::map_response;
use axum::response::Redirect;
use axum::routing::{any, get, post};
use quire_app::Services;

pub use error::AdminError;
pub use password::{MIN_PASSWORD_CHARS, PasswordError};
pub use throttle::{Refusal, Reservation, SignInThrottle};

/// What the admin handlers share: the application's services and the sign-in throttle.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) app: Services,
    pub(crate) throttle: Arc<SignInThrottle>,
}

/// The `/admin` routes, to be merged with the API's router (they add no fallback of their own
/// outside `/admin`).
pub fn router(state: Services) -> Router {
    let state = AdminState {
        app: state,
        throttle: Arc::new(SignInThrottle::default()),
    };
    Router::new()
        .route("/admin", get(pages::dashboard::show))
        .route("/admin/", get(async || Redirect::to("/admin")))
        .route(
            "/admin/login",
            get(pages::login::form).post(pages::login::submit),
        )
        .route("/admin/logout", post(pages::login::logout))
        .route(
            "/admin/keys",
            get(pages::keys::list).post(pages::keys::create),
        )
        .route(
            "/admin/keys/{id}/revoke",
            get(pages::keys::confirm_revoke).post(pages::keys::revoke),
        )
        .route(
            "/admin/sources",
            get(pages::sources::list).post(pages::sources::create),
        )
        .route("/admin/sources/{id}", get(pages::sources::show))
        .route("/admin/sources/{id}/sync", post(pages::sources::sync_now))
        .route(
            "/admin/sources/{id}/sync-settings",
            post(pages::sources::change_sync),
        )
        .route(
            "/admin/sources/{id}/statuses",
            get(pages::sources::statuses),
        )
        .route(
            "/admin/sources/{id}/upload",
            post(pages::sources::upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/admin/documents/{id}", get(pages::sources::document))
        .route("/admin/documents/{id}/delete", post(pages::sources::delete))
        .route(
            "/admin/documents/{id}/metadata",
            post(pages::sources::edit_metadata),
        )
        .route("/admin/review", get(pages::review::list))
        .route(
            "/admin/review/{id}",
            get(pages::review::show).post(pages::review::decide),
        )
        .route(
            "/admin/webhooks",
            get(pages::webhooks::list).post(pages::webhooks::create),
        )
        .route("/admin/webhooks/{id}", get(pages::webhooks::show))
        .route("/admin/webhooks/{id}/delete", post(pages::webhooks::delete))
        .route(
            "/admin/playground",
            get(pages::playground::show).post(pages::playground::search),
        )
        .route("/admin/audit", get(pages::audit::show))
        .route("/admin/assets/{name}", get(assets::serve))
        .route("/admin/{*rest}", any(pages::other::not_found))
        .layer(map_response(security_headers))
        .with_state(state)
}

/// Pages hold secrets (a new key is shown once) and must never be framed or cached.
async fn security_headers(mut response: Response<Body>) -> Response<Body> {
    let headers = response.headers_mut();
    let set = |headers: &mut axum::http::HeaderMap, name, value| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CACHE_CONTROL, "no-store");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        // Style and script come only from the admin's own files (`assets`): no inline code, so
        // markup that slipped past escaping still cannot run.
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    response
}
