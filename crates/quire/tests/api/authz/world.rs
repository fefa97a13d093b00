//! The table's server: its fixtures (two sources, documents, held documents, webhooks, the
//! callers' keys and conversations), one row's request and its answer.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use quire_app::Actor;
use quire_app::keys::KeySpec;
use quire_core::{KeyId, Permission, SourceScope};
use reqwest::header::WWW_AUTHENTICATE;
use reqwest::multipart::{Form, Part};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use super::Target::*;
use super::{Caller, Case, Expected, Op, QUERY, Reach, Target, admin_routes, callers};
use crate::helpers::{TestServer, body, fake_embeddings, source_id};
use crate::review::CV;

/// A request as sent, for reports and for telling echoed ids from leaked ones.
pub(super) struct Sent {
    pub(super) method: Method,
    pub(super) path: String,
    /// The path, the JSON body and the uploaded file names.
    pub(super) words: String,
}

impl fmt::Display for Sent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// An answer: status, the envelope's `error` and `message` for errors, the whole text.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) error: Option<String>,
    pub(super) message: Option<String>,
    pub(super) bearer_challenge: bool,
    pub(super) text: String,
}

impl Answer {
    pub(super) async fn read(response: reqwest::Response) -> Self {
        let status = response.status();
        let bearer_challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .is_some_and(|v| v == "Bearer");
        let text = response.text().await.unwrap();
        let envelope: Option<Value> = (!status.is_success())
            .then(|| serde_json::from_str(&text).ok())
            .flatten();
        let field = |name: &str| {
            envelope
                .as_ref()
                .and_then(|e| e[name].as_str().map(str::to_owned))
        };
        Self {
            status,
            error: field("error"),
            message: field("message"),
            bearer_challenge,
            text,
        }
    }

    pub(super) fn matches(&self, expected: Expected) -> bool {
        self.status == expected.status && self.error.as_deref() == expected.error
    }

    /// Status, error and message with every id masked: what "answered alike" compares.
    pub(super) fn shape(&self) -> String {
        format!(
            "{} {} {}",
            self.status.as_u16(),
            self.error.as_deref().unwrap_or("-"),
            mask_ids(self.message.as_deref().unwrap_or("-"))
        )
    }

    pub(super) fn summary(&self) -> String {
        let text: String = self.text.chars().take(200).collect();
        format!("{} {text}", self.status.as_u16())
    }
}

/// The ids (UUIDs) in a text.
fn uuids_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let is_uuid = |window: &[u8]| {
        window.iter().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i + 36 <= bytes.len() {
        if is_uuid(&bytes[i..i + 36]) {
            found.push(text[i..i + 36].to_owned());
            i += 36;
        } else {
            i += 1;
        }
    }
    found
}

pub(super) fn mask_ids(text: &str) -> String {
    uuids_in(text)
        .iter()
        .fold(text.to_owned(), |masked, id| masked.replace(id, "<id>"))
}

pub(super) fn random_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The `data` of the stream's `done` event.
pub(super) fn done_event(stream: &str) -> Option<Value> {
    stream.split("\n\n").find_map(|event| {
        let mut lines = event.lines();
        if !lines.clone().any(|l| l == "event: done") {
            return None;
        }
        let data = lines.find_map(|l| l.strip_prefix("data:"))?;
        serde_json::from_str(data.trim()).ok()
    })
}

/// The server, its fixtures and the callers' credentials.
pub(super) struct World {
    pub(super) server: TestServer,
    /// An admin key on every source: it makes the fixtures.
    pub(super) root: String,
    pub(super) a: String,
    pub(super) b: String,
    /// A ready document in each source.
    pub(super) doc_a: String,
    pub(super) doc_b: String,
    /// A document held for review in each source, and more to decide.
    pub(super) held_a: String,
    pub(super) held_b: String,
    held_pool: HashMap<Target, Vec<String>>,
    /// A webhook hearing A, one hearing B, one hearing every source.
    pub(super) hooks: HashMap<Target, String>,
    pub(super) secrets: HashMap<Caller, String>,
    pub(super) key_ids: HashMap<Caller, KeyId>,
    conversations: HashMap<Caller, String>,
    root_conversation: String,
    /// Ids a key scoped to A must never be shown (B's, and webhooks beyond A).
    outside: BTreeSet<String>,
    made: u32,
}

impl World {
    pub(super) async fn build(cases: &[Case]) -> Self {
        let fake = fake_embeddings::start().await;
        let server = TestServer::start_with(|c| {
            c.embedding.base_url = Some(fake.base_url.clone());
            c.embedding.model = Some("bag-of-words".into());
            c.webhooks.allow_private_targets = true;
        })
        .await;
        let root = server.key(Permission::Admin).await;
        let a = server.create_source(&root, "Alpha Shelf").await;
        let b = server.create_source(&root, "Bravo Vault").await;
        let doc_a = server
            .upload_ok(
                &root,
                &a,
                "alpha-manual.md",
                b"# Turbines\n\nthe shared turbine manual of the alpha team: check the blades weekly.\n",
            )
            .await;
        let doc_b = server
            .upload_ok(
                &root,
                &b,
                "bravo-ledger.md",
                b"# Turbines\n\nthe shared turbine manual of the bravo team: the bravo vault codes are kept here.\n",
            )
            .await;

        // Held documents: one per source to look at, and one per expected decision.
        let decisions = |target| {
            cases
                .iter()
                .filter(|c| {
                    matches!(c.op, Op::Approve | Op::Redact | Op::Reject)
                        && c.target == target
                        && c.expected.success()
                })
                .count()
                + admin_routes::decisions_expected(target)
        };
        let mut held = HashMap::new();
        for (target, source, prefix, email) in [
            (InA, &a, "alpha", "jane.doe"),
            (InB, &b, "bravo", "bravo.holder"),
        ] {
            let mut ids = Vec::new();
            for n in 0..=decisions(target) {
                let text = format!(
                    "{}\nReference {prefix} {n}.\n",
                    CV.replace("jane.doe", email)
                );
                let name = format!("{prefix}-cv-{n}.md");
                ids.push(
                    server
                        .upload_ok(&root, source, &name, text.as_bytes())
                        .await,
                );
            }
            held.insert(target, (source.clone(), ids));
        }
        server.wait_for_status(&root, &a, &doc_a, "ready").await;
        server.wait_for_status(&root, &b, &doc_b, "ready").await;
        let mut held_pool = HashMap::new();
        for (target, (source, ids)) in held {
            for id in &ids {
                server
                    .wait_for_status(&root, &source, id, "pending_review")
                    .await;
            }
            held_pool.insert(target, ids);
        }
        let held_a = held_pool.get_mut(&InA).unwrap().pop().unwrap();
        let held_b = held_pool.get_mut(&InB).unwrap().pop().unwrap();

        let mut world = Self {
            server,
            root,
            a,
            b,
            doc_a,
            doc_b,
            held_a,
            held_b,
            held_pool,
            hooks: HashMap::new(),
            secrets: HashMap::new(),
            key_ids: HashMap::new(),
            conversations: HashMap::new(),
            root_conversation: String::new(),
            outside: BTreeSet::new(),
            made: 0,
        };
        for target in [InA, InB, Everywhere] {
            let hook = world.fresh_webhook(target).await;
            world.hooks.insert(target, hook);
        }
        world
            .outside
            .extend([world.b.clone(), world.doc_b.clone(), world.held_b.clone()]);
        world.outside.extend(world.held_pool[&InB].iter().cloned());
        world.issue_keys().await;
        world.root_conversation = world.start_conversation(&world.root.clone()).await;
        for caller in callers() {
            if let Some(secret) = world.secrets.get(&caller).cloned()
                && matches!(caller, Caller::Key(..))
            {
                let conversation = world.start_conversation(&secret).await;
                world.conversations.insert(caller, conversation);
            }
        }
        world
    }

    pub(super) async fn issue(
        &self,
        name: String,
        permission: Permission,
        reach: Reach,
    ) -> (KeyId, String) {
        let scope = match reach {
            Reach::All => SourceScope::All,
            Reach::OnlyA => SourceScope::only([source_id(&self.a)]),
        };
        let spec = KeySpec {
            name,
            permission,
            scope,
            rate_limit: None,
        };
        let (record, secret) = quire_app::keys::create(&self.server.ledger, &Actor::Operator, spec)
            .await
            .unwrap();
        (record.id, secret.expose().clone())
    }

    async fn issue_keys(&mut self) {
        for caller in callers() {
            match caller {
                Caller::NoKey => {}
                Caller::Malformed => {
                    self.secrets.insert(caller, "not-a-key".into());
                }
                Caller::Unknown => {
                    self.secrets
                        .insert(caller, format!("qk_{}", "0".repeat(48)));
                }
                Caller::Revoked => {
                    let (id, secret) = self
                        .issue("revoked".into(), Permission::Admin, Reach::All)
                        .await;
                    quire_app::keys::revoke(&self.server.ledger, &Actor::Operator, id)
                        .await
                        .unwrap();
                    self.secrets.insert(caller, secret);
                }
                Caller::Key(level, reach) => {
                    let (id, secret) = self.issue(caller.to_string(), level, reach).await;
                    self.secrets.insert(caller, secret);
                    self.key_ids.insert(caller, id);
                }
            }
        }
    }

    /// Asks once with `key` and returns the new conversation's id.
    async fn start_conversation(&self, key: &str) -> String {
        let response = self
            .server
            .post_json(key, "/api/v1/generate", &json!({"query": QUERY}))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let text = response.text().await.unwrap();
        let done = done_event(&text).unwrap_or_else(|| panic!("no done event: {text}"));
        done["conversationId"].as_str().unwrap().to_owned()
    }

    pub(super) fn next(&mut self) -> u32 {
        self.made += 1;
        self.made
    }

    pub(super) fn source_of(&self, target: Target) -> String {
        match target {
            InA => self.a.clone(),
            InB => self.b.clone(),
            _ => random_id(),
        }
    }

    /// A new document in A or B, for an operation that deletes it.
    pub(super) async fn fresh_document(&mut self, target: Target) -> String {
        let n = self.next();
        let (source, name) = match target {
            InA => (self.a.clone(), format!("alpha-spare-{n}.md")),
            _ => (self.b.clone(), format!("bravo-spare-{n}.md")),
        };
        let text = format!("spare note number {n}");
        let id = self
            .server
            .upload_ok(&self.root, &source, &name, text.as_bytes())
            .await;
        if target == InB {
            self.outside.insert(id.clone());
        }
        id
    }

    /// A new webhook hearing A, B or every source.
    pub(super) async fn fresh_webhook(&mut self, target: Target) -> String {
        let n = self.next();
        let (url, sources) = match target {
            InA => (
                format!("http://127.0.0.1:9/alpha-hook-{n}"),
                json!([self.a]),
            ),
            InB => (
                format!("http://127.0.0.1:9/bravo-hook-{n}"),
                json!([self.b]),
            ),
            _ => (
                format!("http://127.0.0.1:9/bravo-everywhere-{n}"),
                Value::Null,
            ),
        };
        let mut request = json!({"url": url, "events": ["document.ready"]});
        if !sources.is_null() {
            request["sourceIds"] = sources;
        }
        let response = self
            .server
            .post_json(&self.root, "/api/v1/webhooks", &request)
            .await;
        assert_eq!(response.status(), StatusCode::CREATED);
        let id = body(response).await["id"].as_str().unwrap().to_owned();
        if target != InA {
            self.outside.insert(id.clone());
        }
        id
    }

    pub(super) fn fresh_held(&mut self, target: Target) -> String {
        self.held_pool
            .get_mut(&target)
            .and_then(Vec::pop)
            .expect("a held document for every expected decision")
    }

    /// Adds the caller's `Authorization` header, if it has one.
    pub(super) fn authorise(&self, request: RequestBuilder, caller: Caller) -> RequestBuilder {
        match self.secrets.get(&caller) {
            Some(secret) => request.bearer_auth(secret),
            None => request,
        }
    }

    /// The source and document of a target.
    pub(super) fn document(&self, target: Target) -> (String, String) {
        match target {
            InA => (self.a.clone(), self.doc_a.clone()),
            InB => (self.b.clone(), self.doc_b.clone()),
            BDocUnderA => (self.a.clone(), self.doc_b.clone()),
            MissingDocUnderA => (self.a.clone(), random_id()),
            _ => (random_id(), random_id()),
        }
    }

    /// Remembers the ids in an answer about something a key on every source made beyond A.
    pub(super) fn remember_beyond_a(&mut self, text: &str) {
        let ids: Vec<String> = uuids_in(text)
            .into_iter()
            .filter(|id| *id != self.a)
            .collect();
        self.outside.extend(ids);
    }

    /// The `conversationId` for a target, if any (callers without a key continue the root
    /// key's conversation: they are refused before it matters).
    pub(super) fn conversation(&self, caller: Caller, target: Target) -> Option<String> {
        match target {
            OwnConversation => Some(
                self.conversations
                    .get(&caller)
                    .unwrap_or(&self.root_conversation)
                    .clone(),
            ),
            OthersConversation => Some(self.root_conversation.clone()),
            MissingConversation => Some(random_id()),
            _ => None,
        }
    }

    /// The `sourceIds` for a target, if any.
    pub(super) fn source_ids(&self, target: Target) -> Option<Value> {
        match target {
            InA => Some(json!([self.a])),
            InB => Some(json!([self.b])),
            Missing => Some(json!([random_id()])),
            AAndB => Some(json!([self.a, self.b])),
            AAndMissing => Some(json!([self.a, random_id()])),
            _ => None,
        }
    }

    /// Sends one row's request.
    pub(super) async fn send(&mut self, case: &Case) -> (Sent, Answer) {
        let Case {
            caller, op, target, ..
        } = *case;
        let fresh = op.consumes() && case.expected.success();
        // What a key on every source makes beyond A must stay hidden from A's keys: it is
        // named "bravo" and its ids are remembered. A's keys never name B in what they send.
        let beyond_a = !caller.scoped()
            && match op {
                Op::CreateSource => true,
                Op::Upload | Op::UploadBulk => target == InB,
                Op::CreateWebhook => target != InA,
                _ => false,
            };
        let tag = if beyond_a { "bravo" } else { "note" };
        let n = self.next();
        let mut json_body: Option<Value> = None;
        let mut files: Vec<String> = Vec::new();
        let (method, path) = match op {
            Op::ListSources => (Method::GET, "/api/v1/sources".to_owned()),
            Op::CreateSource => {
                json_body = Some(json!({"name": format!("{tag} made {n}")}));
                (Method::POST, "/api/v1/sources".to_owned())
            }
            Op::GetSource => (
                Method::GET,
                format!("/api/v1/sources/{}", self.source_of(target)),
            ),
            Op::ListDocuments => (
                Method::GET,
                format!("/api/v1/sources/{}/documents", self.source_of(target)),
            ),
            Op::SyncNow => {
                json_body = Some(json!({}));
                (
                    Method::POST,
                    format!("/api/v1/sources/{}/sync", self.source_of(target)),
                )
            }
            Op::ChangeSync => {
                json_body = Some(json!({"path": "/srv/handbook"}));
                (
                    Method::PATCH,
                    format!("/api/v1/sources/{}/sync", self.source_of(target)),
                )
            }
            Op::SyncRuns => (
                Method::GET,
                format!("/api/v1/sources/{}/syncs", self.source_of(target)),
            ),
            Op::Upload | Op::UploadBulk => {
                let count = if op == Op::Upload { 1 } else { 2 };
                files = (0..count)
                    .map(|i| format!("{tag}-upload-{n}-{i}.md"))
                    .collect();
                let suffix = if op == Op::Upload { "" } else { "-bulk" };
                (
                    Method::POST,
                    format!(
                        "/api/v1/sources/{}/documents/upload{suffix}",
                        self.source_of(target)
                    ),
                )
            }
            Op::GetDocument
            | Op::GetOriginal
            | Op::PatchDocument
            | Op::PutDocument
            | Op::DeleteDocument => {
                let (source, doc) = if fresh {
                    (self.source_of(target), self.fresh_document(target).await)
                } else {
                    self.document(target)
                };
                match op {
                    Op::GetDocument => (
                        Method::GET,
                        format!("/api/v1/sources/{source}/documents/{doc}"),
                    ),
                    Op::GetOriginal => (
                        Method::GET,
                        format!("/api/v1/sources/{source}/documents/{doc}/original"),
                    ),
                    Op::PatchDocument => {
                        json_body = Some(json!({"metadata": {"reviewed": true}}));
                        (
                            Method::PATCH,
                            format!("/api/v1/sources/{source}/documents/{doc}"),
                        )
                    }
                    Op::PutDocument => {
                        files = vec![format!("{tag}-version-{n}.md")];
                        (
                            Method::PUT,
                            format!("/api/v1/sources/{source}/documents/{doc}"),
                        )
                    }
                    _ => (
                        Method::DELETE,
                        format!("/api/v1/sources/{source}/documents/{doc}"),
                    ),
                }
            }
            Op::Search | Op::Generate => {
                let mut request = json!({"query": QUERY});
                if let Some(ids) = self.source_ids(target) {
                    request["sourceIds"] = ids;
                }
                if let Some(id) = self.conversation(caller, target) {
                    request["conversationId"] = json!(id);
                }
                json_body = Some(request);
                let name = if op == Op::Search {
                    "search"
                } else {
                    "generate"
                };
                (Method::POST, format!("/api/v1/{name}"))
            }
            Op::ListReviews => (Method::GET, "/api/v1/reviews".to_owned()),
            Op::GetReview | Op::Approve | Op::Redact | Op::Reject => {
                let doc = match target {
                    _ if fresh => self.fresh_held(target),
                    InA => self.held_a.clone(),
                    InB => self.held_b.clone(),
                    _ => random_id(),
                };
                if op == Op::GetReview {
                    (Method::GET, format!("/api/v1/reviews/{doc}"))
                } else {
                    json_body = Some(json!({}));
                    let action = format!("{op:?}").to_lowercase();
                    (Method::POST, format!("/api/v1/reviews/{doc}/{action}"))
                }
            }
            Op::ListWebhooks => (Method::GET, "/api/v1/webhooks".to_owned()),
            Op::CreateWebhook => {
                let mut request = json!({
                    "url": format!("http://127.0.0.1:9/{tag}-made-{n}"),
                    "events": ["document.ready"],
                });
                if let Some(ids) = self.source_ids(target) {
                    request["sourceIds"] = ids;
                }
                json_body = Some(request);
                (Method::POST, "/api/v1/webhooks".to_owned())
            }
            Op::GetWebhook | Op::DeleteWebhook | Op::Deliveries => {
                let hook = match target {
                    _ if fresh => self.fresh_webhook(target).await,
                    Missing => random_id(),
                    _ => self.hooks[&target].clone(),
                };
                match op {
                    Op::GetWebhook => (Method::GET, format!("/api/v1/webhooks/{hook}")),
                    Op::DeleteWebhook => (Method::DELETE, format!("/api/v1/webhooks/{hook}")),
                    _ => (Method::GET, format!("/api/v1/webhooks/{hook}/deliveries")),
                }
            }
            Op::Version => (Method::GET, "/api/health/version".to_owned()),
            Op::OpenApi => (Method::GET, "/api/v1/openapi.json".to_owned()),
        };

        let mut request = self
            .server
            .client
            .request(method.clone(), self.server.url(&path));
        request = self.authorise(request, caller);
        if let Some(value) = &json_body {
            request = request.json(value);
        }
        if !files.is_empty() {
            let mut form = Form::new();
            for (i, name) in files.iter().enumerate() {
                let text = format!("# Gaskets\n\n{tag} gasket notes, upload {n} part {i}.\n");
                form = form.part(
                    "file",
                    Part::bytes(text.into_bytes()).file_name(name.clone()),
                );
            }
            request = request.multipart(form);
        }
        let answer = Answer::read(request.send().await.unwrap()).await;
        let words = format!(
            "{path} {} {}",
            json_body.map(|v| v.to_string()).unwrap_or_default(),
            files.join(" ")
        );
        if beyond_a && answer.status.is_success() {
            self.remember_beyond_a(&answer.text);
        }
        (
            Sent {
                method,
                path,
                words,
            },
            answer,
        )
    }

    /// What in `text` a key scoped to A must not see: anything named "bravo", and ids beyond A
    /// that the request did not name itself.
    pub(super) fn leaks(&self, text: &str, request: &str) -> Vec<String> {
        let mut leaks = Vec::new();
        if let Some(at) = text.to_lowercase().find("bravo") {
            let start = text.floor_char_boundary(at.saturating_sub(60));
            let end = text.ceil_char_boundary((at + 60).min(text.len()));
            leaks.push(format!("B's text: …{}…", &text[start..end]));
        }
        for id in &self.outside {
            if text.contains(id.as_str()) && !request.contains(id.as_str()) {
                leaks.push(format!("the id {id} beyond A"));
            }
        }
        leaks
    }
}
