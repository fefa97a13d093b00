//! Authorisation, exhaustively, over the real server: every caller (no key, a malformed,
//! unknown or revoked key, and each permission level with all sources or only source A) ×
//! every operation of the Agent API × every kind of id it takes (in A, in B, nonexistent, B's
//! document under A's path, …), each answer compared with the status docs/api.md gives. The
//! MCP tools and resources get the same callers and ids (`mcp.rs`), and the admin interface's
//! routes that take ids their own callers (no session, an API key, a forged CSRF token, a
//! session; `admin_routes.rs`).
//!
//! Two more properties hold over the whole table: an id outside the caller's scope is
//! answered exactly like a nonexistent one (status, error and message, ids aside), and no
//! answer to a key scoped to A carries anything of B's: everything of B's has "bravo" in its
//! name or text, and B's ids may appear only where the request itself named them. Lists,
//! search, answers, reviews, webhooks, the version's counts and the admin playground are then
//! checked to show A's things to A's keys and B's to the others (so the leak check is not
//! vacuous).
//!
//! One server serves the whole table; an operation that uses its resource up (a delete, a
//! review decision) gets a fresh one whenever it is expected to succeed. Every mismatch is
//! collected and reported at once.

mod admin_routes;
mod mcp;
mod world;

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use quire_core::Permission;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::body;
use world::{World, done_event};

/// The question searched and asked: it matches A's manual and B's ledger alike.
const QUERY: &str = "shared turbine manual";

/// Who calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Caller {
    NoKey,
    Malformed,
    Unknown,
    Revoked,
    /// A valid key: its level, and whether it covers every source or only A.
    Key(Permission, Reach),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Reach {
    All,
    OnlyA,
}

const LEVELS: [Permission; 3] = [Permission::Read, Permission::ReadWrite, Permission::Admin];

fn callers() -> Vec<Caller> {
    let mut callers = vec![
        Caller::NoKey,
        Caller::Malformed,
        Caller::Unknown,
        Caller::Revoked,
    ];
    for level in LEVELS {
        for reach in [Reach::All, Reach::OnlyA] {
            callers.push(Caller::Key(level, reach));
        }
    }
    callers
}

impl Caller {
    fn scoped(self) -> bool {
        matches!(self, Caller::Key(_, Reach::OnlyA))
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::NoKey => f.write_str("no key"),
            Caller::Malformed => f.write_str("malformed key"),
            Caller::Unknown => f.write_str("unknown key"),
            Caller::Revoked => f.write_str("revoked key"),
            Caller::Key(level, Reach::All) => write!(f, "{level} key (all sources)"),
            Caller::Key(level, Reach::OnlyA) => write!(f, "{level} key (only A)"),
        }
    }
}

/// What an operation's id (in its path, or `sourceIds`/`conversationId` in its body) names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Target {
    /// The operation takes no id (a body without `sourceIds`).
    NoId,
    InA,
    InB,
    /// A webhook that hears every source.
    Everywhere,
    /// A well-formed id that names nothing.
    Missing,
    /// B's document under A's path.
    BDocUnderA,
    /// A nonexistent document under A's path.
    MissingDocUnderA,
    /// `sourceIds: [A, B]`.
    AAndB,
    /// `sourceIds: [A, nonexistent]`.
    AAndMissing,
    /// A conversation the caller started.
    OwnConversation,
    /// A conversation another key started.
    OthersConversation,
    /// A well-formed conversation id that names nothing.
    MissingConversation,
}

use Target::*;

/// The ids a document's operation names: in scope, out of it, nonexistent, and B's or no
/// document under A's path.
const DOCUMENT_TARGETS: &[Target] = &[InA, InB, Missing, BDocUnderA, MissingDocUnderA];
/// The ids a search names: none, a source in or out of scope, a nonexistent one, and mixes.
const SEARCH_TARGETS: &[Target] = &[NoId, InA, InB, Missing, AAndB, AAndMissing];
/// The ids a question names: those of a search, and a conversation of the caller's, of another
/// key's or of nobody's.
const QUESTION_TARGETS: &[Target] = &[
    NoId,
    InA,
    InB,
    Missing,
    AAndB,
    AAndMissing,
    OwnConversation,
    OthersConversation,
    MissingConversation,
];

impl Target {
    /// The target whose answer this one's must equal whenever both are refused alike: the
    /// out-of-scope and the foreign are answered like the nonexistent.
    fn twin(self) -> Option<Target> {
        match self {
            InB | Everywhere => Some(Missing),
            OthersConversation => Some(MissingConversation),
            BDocUnderA => Some(MissingDocUnderA),
            AAndB => Some(AAndMissing),
            _ => None,
        }
    }

    /// Whether a key of this reach may see it.
    fn visible(self, reach: Reach) -> bool {
        match self {
            NoId | InA | OwnConversation => true,
            InB | Everywhere | AAndB => reach == Reach::All,
            Missing | BDocUnderA | MissingDocUnderA | AAndMissing | OthersConversation
            | MissingConversation => false,
        }
    }
}

/// Every operation of the Agent API (the test checks that the OpenAPI document lists no other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Op {
    ListSources,
    CreateSource,
    GetSource,
    SyncNow,
    ChangeSync,
    SyncRuns,
    ListDocuments,
    Upload,
    UploadBulk,
    GetDocument,
    GetOriginal,
    PatchDocument,
    PutDocument,
    DeleteDocument,
    Search,
    Generate,
    ListReviews,
    GetReview,
    Approve,
    Redact,
    Reject,
    ListWebhooks,
    CreateWebhook,
    GetWebhook,
    DeleteWebhook,
    Deliveries,
    Version,
    OpenApi,
}

const OPS: [Op; 28] = [
    Op::ListSources,
    Op::CreateSource,
    Op::GetSource,
    Op::SyncNow,
    Op::ChangeSync,
    Op::SyncRuns,
    Op::ListDocuments,
    Op::Upload,
    Op::UploadBulk,
    Op::GetDocument,
    Op::GetOriginal,
    Op::PatchDocument,
    Op::PutDocument,
    Op::DeleteDocument,
    Op::Search,
    Op::Generate,
    Op::ListReviews,
    Op::GetReview,
    Op::Approve,
    Op::Redact,
    Op::Reject,
    Op::ListWebhooks,
    Op::CreateWebhook,
    Op::GetWebhook,
    Op::DeleteWebhook,
    Op::Deliveries,
    Op::Version,
    Op::OpenApi,
];

impl Op {
    /// The method and path as the OpenAPI document names them.
    fn operation(self) -> (&'static str, &'static str) {
        match self {
            Op::ListSources => ("get", "/api/v1/sources"),
            Op::CreateSource => ("post", "/api/v1/sources"),
            Op::GetSource => ("get", "/api/v1/sources/{id}"),
            Op::SyncNow => ("post", "/api/v1/sources/{id}/sync"),
            Op::ChangeSync => ("patch", "/api/v1/sources/{id}/sync"),
            Op::SyncRuns => ("get", "/api/v1/sources/{id}/syncs"),
            Op::ListDocuments => ("get", "/api/v1/sources/{id}/documents"),
            Op::Upload => ("post", "/api/v1/sources/{id}/documents/upload"),
            Op::UploadBulk => ("post", "/api/v1/sources/{id}/documents/upload-bulk"),
            Op::GetDocument => ("get", "/api/v1/sources/{id}/documents/{doc_id}"),
            Op::GetOriginal => ("get", "/api/v1/sources/{id}/documents/{doc_id}/original"),
            Op::PatchDocument => ("patch", "/api/v1/sources/{id}/documents/{doc_id}"),
            Op::PutDocument => ("put", "/api/v1/sources/{id}/documents/{doc_id}"),
            Op::DeleteDocument => ("delete", "/api/v1/sources/{id}/documents/{doc_id}"),
            Op::Search => ("post", "/api/v1/search"),
            Op::Generate => ("post", "/api/v1/generate"),
            Op::ListReviews => ("get", "/api/v1/reviews"),
            Op::GetReview => ("get", "/api/v1/reviews/{doc_id}"),
            Op::Approve => ("post", "/api/v1/reviews/{doc_id}/approve"),
            Op::Redact => ("post", "/api/v1/reviews/{doc_id}/redact"),
            Op::Reject => ("post", "/api/v1/reviews/{doc_id}/reject"),
            Op::ListWebhooks => ("get", "/api/v1/webhooks"),
            Op::CreateWebhook => ("post", "/api/v1/webhooks"),
            Op::GetWebhook => ("get", "/api/v1/webhooks/{id}"),
            Op::DeleteWebhook => ("delete", "/api/v1/webhooks/{id}"),
            Op::Deliveries => ("get", "/api/v1/webhooks/{id}/deliveries"),
            Op::Version => ("get", "/api/health/version"),
            Op::OpenApi => ("get", "/api/v1/openapi.json"),
        }
    }

    fn targets(self) -> &'static [Target] {
        match self {
            Op::ListSources
            | Op::CreateSource
            | Op::ListReviews
            | Op::ListWebhooks
            | Op::Version
            | Op::OpenApi => &[NoId],
            Op::GetSource
            | Op::SyncNow
            | Op::ChangeSync
            | Op::SyncRuns
            | Op::ListDocuments
            | Op::Upload
            | Op::UploadBulk => &[InA, InB, Missing],
            Op::GetDocument
            | Op::GetOriginal
            | Op::PatchDocument
            | Op::PutDocument
            | Op::DeleteDocument => DOCUMENT_TARGETS,
            Op::Search | Op::CreateWebhook => SEARCH_TARGETS,
            // `generate` takes sources and a conversation.
            Op::Generate => QUESTION_TARGETS,
            Op::GetReview | Op::Approve | Op::Redact | Op::Reject => &[InA, InB, Missing],
            Op::GetWebhook | Op::DeleteWebhook | Op::Deliveries => &[InA, InB, Everywhere, Missing],
        }
    }

    /// The lowest level allowed; `None` for the public operations.
    fn needs(self) -> Option<Permission> {
        match self {
            Op::Version | Op::OpenApi => None,
            Op::ListSources
            | Op::GetSource
            | Op::SyncRuns
            | Op::ListDocuments
            | Op::GetDocument
            | Op::GetOriginal => Some(Permission::Read),
            Op::Search | Op::Generate => Some(Permission::Read),
            Op::CreateSource
            | Op::SyncNow
            | Op::Upload
            | Op::UploadBulk
            | Op::PatchDocument
            | Op::PutDocument
            | Op::DeleteDocument => Some(Permission::ReadWrite),
            Op::ListReviews | Op::GetReview | Op::Approve | Op::Redact | Op::Reject => {
                Some(Permission::Admin)
            }
            Op::ChangeSync => Some(Permission::Admin),
            Op::ListWebhooks
            | Op::CreateWebhook
            | Op::GetWebhook
            | Op::DeleteWebhook
            | Op::Deliveries => Some(Permission::Admin),
        }
    }

    fn success(self) -> StatusCode {
        match self {
            Op::CreateSource | Op::CreateWebhook => StatusCode::CREATED,
            Op::Upload | Op::UploadBulk | Op::PutDocument | Op::SyncNow => StatusCode::ACCEPTED,
            Op::DeleteDocument | Op::Reject | Op::DeleteWebhook => StatusCode::NO_CONTENT,
            _ => StatusCode::OK,
        }
    }

    /// Whether a success uses the resource up (it then gets a fresh one).
    fn consumes(self) -> bool {
        matches!(
            self,
            // A new version replaces the document's text, which other operations search for.
            Op::DeleteDocument
                | Op::PutDocument
                | Op::Approve
                | Op::Redact
                | Op::Reject
                | Op::DeleteWebhook
        )
    }
}

/// A status and, for errors, the envelope's `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Expected {
    status: StatusCode,
    error: Option<&'static str>,
}

impl Expected {
    fn success(self) -> bool {
        self.status.is_success()
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error {
            Some(error) => write!(f, "{} {error}", self.status.as_u16()),
            None => write!(f, "{}", self.status.as_u16()),
        }
    }
}

/// The rules of docs/api.md: a key first (401), then its level (403; a key limited to some
/// sources cannot create sources), then the scope (404, as if absent).
fn expected(caller: Caller, op: Op, target: Target) -> Expected {
    let refused = |status, error| Expected {
        status,
        error: Some(error),
    };
    let Some(needed) = op.needs() else {
        return Expected {
            status: op.success(),
            error: None,
        };
    };
    let Caller::Key(level, reach) = caller else {
        return refused(StatusCode::UNAUTHORIZED, "unauthorized");
    };
    if level < needed || (op == Op::CreateSource && reach == Reach::OnlyA) {
        return refused(StatusCode::FORBIDDEN, "forbidden");
    }
    // The world's sources are network sources, which do not sync: one visible to the caller
    // cannot be asked to sync or given sync settings (400), and lists no runs (200; the runs of syncing sources are
    // tested in `syncs.rs`).
    if matches!(op, Op::SyncNow | Op::ChangeSync) && target.visible(reach) {
        return refused(StatusCode::BAD_REQUEST, "bad_request");
    }
    if target.visible(reach) {
        Expected {
            status: op.success(),
            error: None,
        }
    } else {
        refused(StatusCode::NOT_FOUND, "not_found")
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
struct Case {
    caller: Caller,
    op: Op,
    target: Target,
    expected: Expected,
}

fn table() -> Vec<Case> {
    let mut cases = Vec::new();
    for caller in callers() {
        for op in OPS {
            for &target in op.targets() {
                cases.push(Case {
                    caller,
                    op,
                    target,
                    expected: expected(caller, op, target),
                });
            }
        }
    }
    cases
}

#[tokio::test]
async fn every_caller_gets_the_documented_answer_for_every_operation_and_id() {
    let cases = table();
    let mut world = World::build(&cases).await;
    let mut mismatches = Vec::new();

    // The table covers every operation the server documents.
    let url = world.server.url("/api/v1/openapi.json");
    let document = body(world.server.client.get(url).send().await.unwrap()).await;
    let documented: BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().unwrap().keys();
            methods
                .map(|m| (m.clone(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let tabled: BTreeSet<(String, String)> = OPS
        .iter()
        .map(|op| op.operation())
        .map(|(m, p)| (m.to_owned(), p.to_owned()))
        .collect();
    assert_eq!(
        documented, tabled,
        "the table and the OpenAPI document differ"
    );
    let mut shapes: HashMap<(Caller, Op, Target), String> = HashMap::new();

    for case in &cases {
        let (sent, answer) = world.send(case).await;
        let who = case.caller;
        if !answer.matches(case.expected) {
            mismatches.push(format!(
                "{sent} as {who} ({:?}): expected {}, got {}",
                case.target,
                case.expected,
                answer.summary()
            ));
        }
        if case.expected.status == StatusCode::UNAUTHORIZED && !answer.bearer_challenge {
            mismatches.push(format!(
                "{sent} as {who}: 401 without WWW-Authenticate: Bearer"
            ));
        }
        if who.scoped() {
            for leak in world.leaks(&answer.text, &sent.words) {
                mismatches.push(format!("{sent} as {who} ({:?}) leaks {leak}", case.target));
            }
        }
        shapes.insert((who, case.op, case.target), answer.shape());
    }
    // Out of scope, or another key's, is answered exactly like nonexistent.
    for case in &cases {
        let Some(twin) = case.target.twin() else {
            continue;
        };
        if case.expected != expected(case.caller, case.op, twin) {
            continue;
        }
        let this = &shapes[&(case.caller, case.op, case.target)];
        let other = &shapes[&(case.caller, case.op, twin)];
        if this != other {
            mismatches.push(format!(
                "{:?} as {}: {:?} answered `{this}` but {twin:?} `{other}`",
                case.op, case.caller, case.target
            ));
        }
    }
    let api_cases = cases.len();
    let mcp_cases = mcp::check(&mut world, &mut mismatches).await;
    let admin_cases = admin_routes::check(&mut world, &mut mismatches).await;
    check_views(&world, &mut mismatches).await;
    admin_routes::check_playground(&world, &mut mismatches).await;
    check_duplicate_bytes(&world, &mut mismatches).await;

    eprintln!(
        "authz: {api_cases} API, {mcp_cases} MCP and {admin_cases} admin-route combinations \
         checked"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} combinations or views went wrong:\n{}",
        mismatches.len(),
        api_cases + mcp_cases + admin_cases,
        mismatches.join("\n")
    );
}

/// What each key sees in lists, search, answers, reviews, webhooks and the version: A's keys
/// only A's things (and some of them), the others B's too.
async fn check_views(world: &World, mismatches: &mut Vec<String>) {
    let server = &world.server;
    for caller in callers() {
        let Caller::Key(level, reach) = caller else {
            continue;
        };
        let key = &world.secrets[&caller];
        let scoped = reach == Reach::OnlyA;
        let mut check = |what: &str, seen: Vec<String>, text: &str| {
            if scoped {
                if seen.is_empty() || seen.iter().any(|s| *s != world.a) {
                    mismatches.push(format!(
                        "{what} as {caller}: sources {seen:?}, expected A's only"
                    ));
                }
                for leak in world.leaks(text, "") {
                    mismatches.push(format!("{what} as {caller} leaks {leak}"));
                }
            } else if !seen.contains(&world.b) {
                mismatches.push(format!("{what} as {caller}: B missing from {seen:?}"));
            }
        };
        let listed = server
            .get(key, "/api/v1/sources")
            .await
            .text()
            .await
            .unwrap();
        let ids = strings(&listed, |v| {
            v.as_array().map(|a| a.iter().map(|s| &s["id"]).collect())
        });
        check("GET /api/v1/sources", ids, &listed);

        let found = server
            .search(key, json!({"query": QUERY, "limit": 100}))
            .await
            .text()
            .await
            .unwrap();
        let ids = strings(&found, |v| {
            v["results"]
                .as_array()
                .map(|a| a.iter().map(|r| &r["dataSource"]["id"]).collect())
        });
        check("POST /api/v1/search", ids, &found);

        if scoped {
            let answered = server
                .post_json(key, "/api/v1/generate", &json!({"query": QUERY}))
                .await
                .text()
                .await
                .unwrap();
            let done = done_event(&answered).unwrap_or_default();
            let ids = strings(&done.to_string(), |v| {
                v["citations"]
                    .as_array()
                    .map(|a| a.iter().map(|c| &c["dataSourceId"]).collect())
            });
            check("POST /api/v1/generate", ids, &answered);
        }
        if level != Permission::Admin {
            continue;
        }
        let reviews = server
            .get(key, "/api/v1/reviews")
            .await
            .text()
            .await
            .unwrap();
        let ids = strings(&reviews, |v| {
            v.as_array()
                .map(|a| a.iter().map(|r| &r["document"]["dataSourceId"]).collect())
        });
        check("GET /api/v1/reviews", ids, &reviews);

        let hooks = server
            .get(key, "/api/v1/webhooks")
            .await
            .text()
            .await
            .unwrap();
        let listed: Value = serde_json::from_str(&hooks).unwrap_or_default();
        let heard: Vec<String> = listed
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|w| match w["sourceIds"].as_array() {
                Some(ids) => ids
                    .iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect(),
                // A webhook on every source hears B too.
                None => vec![world.b.clone()],
            })
            .collect();
        check("GET /api/v1/webhooks", heard, &hooks);

        // The instance's chunk count covers B's documents: only for keys on every source.
        let version = body(server.get(key, "/api/health/version").await).await;
        let count = &version["semanticSearch"]["embeddedChunks"];
        if scoped && !count.is_null() {
            mismatches.push(format!(
                "GET /api/health/version as {caller}: embeddedChunks {count} counts every source"
            ));
        }
        if !scoped && count.as_u64().is_none_or(|n| n == 0) {
            mismatches.push(format!(
                "GET /api/health/version as {caller}: no embeddedChunks in {version}"
            ));
        }
    }
}

/// The strings `pick` finds in the JSON `text` (none when it is not JSON).
fn strings(text: &str, pick: impl Fn(&Value) -> Option<Vec<&Value>>) -> Vec<String> {
    let value: Value = serde_json::from_str(text).unwrap_or_default();
    pick(&value)
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Duplicates are found per source: B's bytes uploaded into A by A's key are a new document
/// of A, never B's existing one. Last, because it puts B's text into A.
async fn check_duplicate_bytes(world: &World, mismatches: &mut Vec<String>) {
    let key = &world.secrets[&Caller::Key(Permission::ReadWrite, Reach::OnlyA)];
    let bytes = b"# Turbines\n\nthe shared turbine manual of the bravo team: the bravo vault codes are kept here.\n";
    let response = world.server.upload(key, &world.a, "copy.md", bytes).await;
    let status = response.status();
    let text = response.text().await.unwrap();
    if status != StatusCode::ACCEPTED || text.contains(&world.doc_b) || text.contains(&world.b) {
        mismatches.push(format!(
            "B's bytes uploaded into A by A's key: expected a new document (202), got {status} {text}"
        ));
    }
}
