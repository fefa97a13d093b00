//! Signing in and out.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::html;
use quire_app::admin_access;
use quire_core::Secret;

use crate::html::{alert, bare_page, csrf_field, time};
use crate::session::{
    Client, Form, LOGIN_COOKIE, SESSION_COOKIE, Signed, constant_time_eq, cookie, csrf_refused,
    hash_token, new_token, session_cookie, session_expiry, set_cookie,
};
use crate::throttle::Refusal;
use crate::{AdminError, AdminState};
use crate::{login_token, password};

fn login_page(status: StatusCode, token: &str, message: Option<&str>) -> Response {
    let body = html! {
        @if let Some(message) = message {
            (alert(message))
        }
        form method="post" action="/admin/login" {
            (csrf_field(token))
            label for="password" { "Admin password" }
            input type="password" id="password" name="password" autocomplete="current-password" required autofocus;
            // The field and the button are inline: a space keeps them apart.
            " "
            button type="submit" { "Sign in" }
        }
    };
    bare_page(status, "Sign in", body)
}

/// GET /admin/login: the form, with a fresh token this server signed, in the form and in a
/// cookie (double submit).
pub(crate) async fn form(
    State(state): State<AdminState>,
    client: Client,
) -> Result<Response, AdminError> {
    let Some(password_hash) = admin_access::password_hash(&state.app).await? else {
        return Ok(bare_page(
            StatusCode::OK,
            "No password set",
            html! {
                p {
                    "The admin interface has no password yet. Set one with "
                    code { "quire admin set-password" }
                    " (it reads the password from standard input), or start the server once with "
                    code { "QUIRE_ADMIN_PASSWORD" }
                    " set."
                }
            },
        ));
    };
    let token = login_token::issue(&password_hash, state.app.now())?;
    let mut response = login_page(StatusCode::OK, &token, None);
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(
            LOGIN_COOKIE,
            &token,
            login_token::LIFETIME_SECONDS,
            client.https,
        ),
    );
    Ok(response)
}

/// POST /admin/login: checks the form token (the cookie and the field agree, and this server
/// signed it under the current password, unexpired), the throttle and the password.
pub(crate) async fn submit(
    State(state): State<AdminState>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, AdminError> {
    let form = Form::parse(&body);
    let now = state.app.now();
    let Some(stored) = admin_access::password_hash(&state.app).await? else {
        // Nothing to sign in to, and no key that could have signed a form token.
        return Ok(login_page(
            StatusCode::UNAUTHORIZED,
            "",
            Some("No admin password is set; use `quire admin set-password`."),
        ));
    };
    let token = match (cookie(&headers, LOGIN_COOKIE), form.get("csrf")) {
        (Some(cookie), Some(field))
            if constant_time_eq(cookie, field) && login_token::is_valid(&stored, field, now) =>
        {
            cookie.to_owned()
        }
        _ => return Ok(csrf_refused()),
    };
    state.throttle.password_is(&stored);
    let reservation = match state.throttle.reserve(client.ip, now) {
        Ok(reservation) => reservation,
        Err(until) => return Ok(throttled(Refusal::LockedUntil(until), now)),
    };
    let Some(slot) = state.throttle.verification_slot().await else {
        state.throttle.withdraw(reservation);
        return Ok(throttled(Refusal::Busy, now));
    };
    let password = Secret::new(form.get("password").unwrap_or_default().to_owned());
    let verified = password::verify_blocking(password, stored).await;
    drop(slot);
    let from = client
        .ip
        .map(|ip| ip.to_string())
        .unwrap_or_else(|| "unknown address".into());
    if !verified? {
        // The reservation stays: it is this failure.
        admin_access::sign_in_failed(&state.app, &from).await?;
        return Ok(login_page(
            StatusCode::UNAUTHORIZED,
            &token,
            Some("Wrong password."),
        ));
    }
    state.throttle.succeeded(reservation);
    let session = new_token()?;
    let csrf = new_token()?;
    admin_access::start_session(
        &state.app,
        &hash_token(&session),
        &csrf,
        session_expiry(now),
        &from,
    )
    .await?;
    let mut response = Redirect::to("/admin").into_response();
    let headers = response.headers_mut();
    headers.append(header::SET_COOKIE, session_cookie(&session, client.https));
    headers.append(
        header::SET_COOKIE,
        set_cookie(LOGIN_COOKIE, "", 0, client.https),
    );
    Ok(response)
}

/// The 429 page of a refused attempt, with `Retry-After`.
fn throttled(refusal: Refusal, now: DateTime<Utc>) -> Response {
    let (wait, message) = match refusal {
        Refusal::LockedUntil(until) => (
            (until - now).num_seconds().max(1),
            html! {
                p {
                    "Sign-in is paused after too many wrong passwords. Try again after "
                    (time(until)) "."
                }
            },
        ),
        Refusal::Busy => (
            1,
            html! {
                p { "Too many sign-in attempts are being checked right now. Try again in a moment." }
            },
        ),
    };
    let mut response = bare_page(StatusCode::TOO_MANY_REQUESTS, "Too many attempts", message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(wait));
    response
}

/// POST /admin/logout: ends the session.
pub(crate) async fn logout(
    State(state): State<AdminState>,
    signed: Signed,
    client: Client,
    body: Bytes,
) -> Result<Response, AdminError> {
    if !signed.csrf_ok(&Form::parse(&body)) {
        return Ok(csrf_refused());
    }
    admin_access::end_session(&state.app, &signed.token_hash).await?;
    let mut response = Redirect::to("/admin/login").into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, "", 0, client.https),
    );
    Ok(response)
}
