//! The admin interface's routes that take ids, for every visitor (no session, an API key
//! instead of a session, a session with a forged CSRF token, a session) and every id (in A, in
//! B, a webhook on every source, nonexistent), as docs/admin.md describes them: without a
//! session `GET` redirects to the sign-in page and anything else is 401; a forged token is 403;
//! the one administrator sees every source, so only nonexistent ids are 404. Then the search
//! playground, which runs with one key's scope, must show A's keys nothing of B's.

use std::fmt;

use reqwest::header::{COOKIE, LOCATION};
use reqwest::multipart::{Form, Part};
use reqwest::{Method, StatusCode};

use super::Target::{self, Everywhere, InA, InB, Missing};
use super::world::random_id;
use super::{Caller, QUERY, Reach, World, callers};
use crate::admin::{PASSWORD, client, encode, set_password, sign_in};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Visitor {
    NoSession,
    /// An admin API key on every source, and no session.
    ApiKey,
    /// A session, with a CSRF token that is not its own.
    ForgedCsrf,
    Session,
}

const VISITORS: [Visitor; 4] = [
    Visitor::NoSession,
    Visitor::ApiKey,
    Visitor::ForgedCsrf,
    Visitor::Session,
];

/// Every admin route with an id in its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Source,
    Statuses,
    Upload,
    Document,
    EditMetadata,
    DeleteDocument,
    Review,
    Decide,
    Webhook,
    DeleteWebhook,
    RevokeForm,
    Revoke,
}

const ROUTES: [Route; 12] = [
    Route::Source,
    Route::Statuses,
    Route::Upload,
    Route::Document,
    Route::EditMetadata,
    Route::DeleteDocument,
    Route::Review,
    Route::Decide,
    Route::Webhook,
    Route::DeleteWebhook,
    Route::RevokeForm,
    Route::Revoke,
];

impl Route {
    fn post(self) -> bool {
        matches!(
            self,
            Route::Upload
                | Route::EditMetadata
                | Route::DeleteDocument
                | Route::Decide
                | Route::DeleteWebhook
                | Route::Revoke
        )
    }

    fn targets(self) -> &'static [Target] {
        match self {
            // Keys belong to no source: one that exists, one that does not.
            Route::RevokeForm | Route::Revoke => &[InA, Missing],
            Route::Webhook | Route::DeleteWebhook => &[InA, InB, Everywhere, Missing],
            _ => &[InA, InB, Missing],
        }
    }
}

/// A status and, for redirects, where to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    status: StatusCode,
    location: Option<String>,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.status.as_u16())?;
        if let Some(location) = &self.location {
            write!(f, " → {location}")?;
        }
        Ok(())
    }
}

fn redirect(to: impl Into<String>) -> Outcome {
    Outcome {
        status: StatusCode::SEE_OTHER,
        location: Some(to.into()),
    }
}

fn status(status: StatusCode) -> Outcome {
    Outcome {
        status,
        location: None,
    }
}

/// docs/admin.md's rules; `source` is the source of the target, where a redirect names it.
fn expected(visitor: Visitor, route: Route, target: Target, source: &str) -> Outcome {
    match visitor {
        Visitor::NoSession | Visitor::ApiKey if route.post() => {
            return status(StatusCode::UNAUTHORIZED);
        }
        Visitor::NoSession | Visitor::ApiKey => return redirect("/admin/login"),
        Visitor::ForgedCsrf if route.post() => return status(StatusCode::FORBIDDEN),
        Visitor::ForgedCsrf | Visitor::Session => {}
    }
    match (route, target) {
        // A review that is not waiting (decided, deleted, never there) sends the
        // administrator back to the queue with a note.
        (Route::Review | Route::Decide, Missing) => redirect("/admin/review?done=gone"),
        (_, Missing) => status(StatusCode::NOT_FOUND),
        (Route::Upload | Route::DeleteDocument, _) => redirect(format!("/admin/sources/{source}")),
        // The document's own page (`check` adds the id, which this table does not know).
        (Route::EditMetadata, _) => redirect("/admin/documents/"),
        (Route::Decide, _) => redirect("/admin/review?done=approved"),
        (Route::DeleteWebhook, _) => redirect("/admin/webhooks"),
        (Route::Revoke, _) => redirect("/admin/keys"),
        _ => status(StatusCode::OK),
    }
}

/// Review decisions the admin table expects to succeed on `target` (each needs a held
/// document of its own).
pub(super) fn decisions_expected(target: Target) -> usize {
    VISITORS
        .iter()
        .filter(|v| {
            target != Missing
                && expected(**v, Route::Decide, target, "")
                    == redirect("/admin/review?done=approved")
        })
        .count()
}

/// Runs the admin table; returns how many combinations it checked.
pub(super) async fn check(world: &mut World, mismatches: &mut Vec<String>) -> usize {
    set_password(&world.server, PASSWORD).await;
    let (cookie, csrf) = sign_in(&world.server).await;
    let spare_key = world
        .issue("spare".into(), quire_core::Permission::Read, Reach::All)
        .await
        .0
        .to_string();
    let mut checked = 0;
    for visitor in VISITORS {
        for route in ROUTES {
            for &target in route.targets() {
                checked += 1;
                let source = world.source_of(target);
                let want = expected(visitor, route, target, &source);
                let fresh = want.status == StatusCode::SEE_OTHER
                    && !matches!(visitor, Visitor::NoSession | Visitor::ApiKey)
                    && target != Missing;
                let id = match (route, target) {
                    (_, Missing) => random_id(),
                    (Route::Source | Route::Statuses | Route::Upload, _) => source.clone(),
                    (Route::DeleteDocument, _) if fresh => world.fresh_document(target).await,
                    (Route::Document | Route::EditMetadata | Route::DeleteDocument, InA) => {
                        world.doc_a.clone()
                    }
                    (Route::Document | Route::EditMetadata | Route::DeleteDocument, _) => {
                        world.doc_b.clone()
                    }
                    (Route::Decide, _) if fresh => world.fresh_held(target),
                    (Route::Review | Route::Decide, InA) => world.held_a.clone(),
                    (Route::Review | Route::Decide, _) => world.held_b.clone(),
                    (Route::DeleteWebhook, _) if fresh => world.fresh_webhook(target).await,
                    (Route::Webhook | Route::DeleteWebhook, _) => world.hooks[&target].clone(),
                    (Route::Revoke, _) if fresh => world
                        .issue("spare".into(), quire_core::Permission::Read, Reach::All)
                        .await
                        .0
                        .to_string(),
                    (Route::RevokeForm | Route::Revoke, _) => spare_key.clone(),
                };
                let want = match (route, &want.location) {
                    (Route::EditMetadata, Some(_)) => redirect(format!("/admin/documents/{id}")),
                    _ => want,
                };
                let (path, fields): (String, Vec<(&str, &str)>) = match route {
                    Route::Source => (format!("/admin/sources/{id}"), vec![]),
                    Route::Statuses => (format!("/admin/sources/{id}/statuses"), vec![]),
                    Route::Upload => (format!("/admin/sources/{id}/upload"), vec![]),
                    Route::Document => (format!("/admin/documents/{id}"), vec![]),
                    Route::EditMetadata => (
                        format!("/admin/documents/{id}/metadata"),
                        vec![("metadata", r#"{"checked": true}"#)],
                    ),
                    Route::DeleteDocument => (
                        format!("/admin/documents/{id}/delete"),
                        vec![("confirm", "yes")],
                    ),
                    Route::Review => (format!("/admin/review/{id}"), vec![]),
                    Route::Decide => (format!("/admin/review/{id}"), vec![("decision", "approve")]),
                    Route::Webhook => (format!("/admin/webhooks/{id}"), vec![]),
                    Route::DeleteWebhook => (
                        format!("/admin/webhooks/{id}/delete"),
                        vec![("confirm", "yes")],
                    ),
                    Route::RevokeForm | Route::Revoke => {
                        (format!("/admin/keys/{id}/revoke"), vec![])
                    }
                };
                let token = if visitor == Visitor::Session {
                    csrf.as_str()
                } else {
                    "forged"
                };
                let method = if route.post() {
                    Method::POST
                } else {
                    Method::GET
                };
                let mut request = client().request(method.clone(), world.server.url(&path));
                request = match visitor {
                    Visitor::NoSession => request,
                    Visitor::ApiKey => request.bearer_auth(&world.root),
                    Visitor::ForgedCsrf | Visitor::Session => request.header(COOKIE, &cookie),
                };
                if route == Route::Upload {
                    let n = world.next();
                    let form = Form::new().text("csrf", token.to_owned()).part(
                        "files",
                        Part::bytes(format!("admin upload {n}").into_bytes())
                            .file_name(format!("admin-upload-{n}.md")),
                    );
                    request = request.multipart(form);
                } else if route.post() {
                    let mut all = vec![("csrf", token)];
                    all.extend(fields);
                    request = request
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(encode(&all));
                }
                let response = request.send().await.unwrap();
                let got = Outcome {
                    status: response.status(),
                    location: response
                        .headers()
                        .get(LOCATION)
                        .map(|l| l.to_str().unwrap().to_owned()),
                };
                if got != want {
                    mismatches.push(format!(
                        "{method} {path} ({target:?}) as {visitor:?}: expected {want}, got {got}"
                    ));
                }
            }
        }
    }
    checked
}

/// The playground searches and answers with the scope of the chosen key: A's keys get A's
/// manual and nothing of B's, a key on every source gets B's ledger too.
pub(super) async fn check_playground(world: &World, mismatches: &mut Vec<String>) {
    let (cookie, csrf) = sign_in(&world.server).await;
    for caller in callers() {
        let Caller::Key(_, reach) = caller else {
            continue;
        };
        let key = world.key_ids[&caller].to_string();
        for action in ["search", "ask"] {
            let fields = [
                ("csrf", csrf.as_str()),
                ("key", key.as_str()),
                ("query", QUERY),
                ("action", action),
            ];
            let response = client()
                .post(world.server.url("/admin/playground"))
                .header(COOKIE, &cookie)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(encode(&fields))
                .send()
                .await
                .unwrap();
            let status = response.status();
            let html = response.text().await.unwrap();
            let what = format!("playground {action} as {caller}");
            if status != StatusCode::OK || !html.contains("alpha-manual.md") {
                mismatches.push(format!("{what}: {status}, A's manual not shown"));
            }
            match reach {
                Reach::OnlyA => {
                    for leak in world.leaks(&html, "") {
                        mismatches.push(format!("{what} leaks {leak}"));
                    }
                }
                Reach::All if action == "search" && !html.contains("bravo-ledger.md") => {
                    mismatches.push(format!("{what}: B's ledger not shown"));
                }
                Reach::All => {}
            }
        }
    }
}
