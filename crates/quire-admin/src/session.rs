//! Sessions: the `quire_admin` cookie, the signed-in extractor, CSRF checks and the form
//! body reader.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Duration, Utc};
use quire_app::admin_access;
use sha2::{Digest, Sha256};

use crate::error::random_hex;
use crate::{AdminError, AdminState, html};

/// The session cookie.
pub(crate) const SESSION_COOKIE: &str = "quire_admin";
/// The sign-in form's double-submit cookie.
pub(crate) const LOGIN_COOKIE: &str = "quire_admin_login";
/// How long a session lasts from sign-in, whatever happens in it.
pub(crate) const SESSION_HOURS: i64 = 12;
const TOKEN_BYTES: usize = 32;

/// The stored form of a session token.
pub(crate) fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A new random token (hex).
pub(crate) fn new_token() -> Result<String, AdminError> {
    random_hex(TOKEN_BYTES)
}

/// The value of cookie `name` in the request, if sent.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// True when the client reached us over HTTPS (directly or through a proxy that says so).
fn is_https(parts_uri_scheme: Option<&str>, headers: &HeaderMap) -> bool {
    parts_uri_scheme == Some("https")
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// What a handler needs to know about the request's transport.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client {
    /// The peer's address, when the server records it.
    pub(crate) ip: Option<IpAddr>,
    /// Whether cookies must be `Secure`.
    pub(crate) https: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Client {
            ip: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
            https: is_https(parts.uri.scheme_str(), &parts.headers),
        })
    }
}

/// A `Set-Cookie` value for an admin cookie (`max_age` 0 deletes it).
pub(crate) fn set_cookie(name: &str, value: &str, max_age: i64, https: bool) -> HeaderValue {
    let secure = if https { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Max-Age={max_age}; Path=/admin; HttpOnly; SameSite=Strict{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("quire_admin_invalid=1; Max-Age=0"))
}

/// The cookie that starts a session of `SESSION_HOURS`.
pub(crate) fn session_cookie(token: &str, https: bool) -> HeaderValue {
    set_cookie(SESSION_COOKIE, token, SESSION_HOURS * 3600, https)
}

/// When a session created at `now` ends.
pub(crate) fn session_expiry(now: DateTime<Utc>) -> DateTime<Utc> {
    now + Duration::hours(SESSION_HOURS)
}

/// A signed-in administrator. Extracting it fails with a redirect to the sign-in page for
/// GET and HEAD, and 401 for anything else.
#[derive(Debug, Clone)]
pub(crate) struct Signed {
    /// The hash of the session's token (to end it).
    pub(crate) token_hash: String,
    /// The session's CSRF token.
    pub(crate) csrf: String,
}

/// Why no session was found.
pub(crate) enum NotSignedIn {
    Redirect,
    Unauthorized,
    Failed(AdminError),
}

impl IntoResponse for NotSignedIn {
    fn into_response(self) -> Response {
        match self {
            NotSignedIn::Redirect => Redirect::to("/admin/login").into_response(),
            NotSignedIn::Unauthorized => html::bare_page(
                StatusCode::UNAUTHORIZED,
                "Not signed in",
                maud::html! {
                    p { "Your session has ended or you are not signed in." }
                    (html::back("/admin/login", "Sign in"))
                },
            ),
            NotSignedIn::Failed(e) => e.into_response(),
        }
    }
}

impl FromRequestParts<AdminState> for Signed {
    type Rejection = NotSignedIn;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AdminState,
    ) -> Result<Self, Self::Rejection> {
        let missing = if parts.method == Method::GET || parts.method == Method::HEAD {
            NotSignedIn::Redirect
        } else {
            NotSignedIn::Unauthorized
        };
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(missing);
        };
        let token_hash = hash_token(token);
        // An ended session is not found.
        let session = admin_access::session(&state.app, &token_hash)
            .await
            .map_err(|e| NotSignedIn::Failed(e.into()))?;
        match session {
            Some(s) => Ok(Signed {
                token_hash,
                csrf: s.csrf,
            }),
            None => Err(missing),
        }
    }
}

impl Signed {
    /// True when a form's `csrf` field is the session's token (else answer [`csrf_refused`]).
    pub(crate) fn csrf_ok(&self, form: &Form) -> bool {
        form.get("csrf")
            .is_some_and(|t| constant_time_eq(t, &self.csrf))
    }
}

/// The answer to a form whose CSRF token is missing or wrong.
pub(crate) fn csrf_refused() -> Response {
    html::bare_page(
        StatusCode::FORBIDDEN,
        "Form expired",
        maud::html! {
            p {
                "This form could not be verified (a missing or outdated security token). Go back, \
                 reload the page and try again."
            }
            (html::back("/admin", "Back to the dashboard"))
        },
    )
}

/// Compares two tokens without stopping at the first difference.
pub(crate) fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// An `application/x-www-form-urlencoded` body; repeated fields (checkboxes) are kept.
#[derive(Debug, Default)]
pub(crate) struct Form(Vec<(String, String)>);

impl Form {
    /// Parses a body.
    pub(crate) fn parse(body: &[u8]) -> Self {
        Form(form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cookies_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; quire_admin=tok; b=2"),
        );
        assert_eq!(cookie(&headers, "quire_admin"), Some("tok"));
        assert_eq!(cookie(&headers, "quire_admin_login"), None);
    }

    #[test]
    fn https_from_forwarded_proto() {
        let mut headers = HeaderMap::new();
        assert!(!is_https(None, &headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https, http"));
        assert!(is_https(None, &headers));
        assert!(
            set_cookie("n", "v", 1, true)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
    }

    #[test]
    fn forms_keep_repeated_fields() {
        let form = Form::parse(b"name=a+b&source=1&source=2&csrf=%3Cx%3E");
        assert_eq!(form.get("name"), Some("a b"));
        assert_eq!(form.all("source").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(form.get("csrf"), Some("<x>"));
        assert!(constant_time_eq("abc", "abc") && !constant_time_eq("abc", "abd"));
    }
}
