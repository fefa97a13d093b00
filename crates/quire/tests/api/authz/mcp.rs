//! The MCP door (`/mcp`, docs/mcp.md) through the same callers and ids as the REST table:
//! a caller without a valid key gets HTTP 401; a `read` key calling `upload_document` gets the
//! tool error `forbidden`; an id outside the key's scope is the tool error `not_found` (for a
//! resource, the JSON-RPC error -32002), answered exactly like a nonexistent id; and no answer
//! to a key scoped to A carries anything of B's. The server is stateless, so each call is one
//! plain JSON-RPC request.

use std::collections::HashMap;
use std::fmt;

use quire_core::Permission;
use reqwest::StatusCode;
use reqwest::header::ACCEPT;
use serde_json::{Value, json};

use super::Target::{self, InA, InB, Missing, NoId};
use super::world::mask_ids;
use super::{Caller, QUERY, World, callers};
use super::{DOCUMENT_TARGETS, QUESTION_TARGETS, SEARCH_TARGETS};
use crate::helpers::sse::json_rpc_answer;

/// Every tool, and the two resource methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Call {
    ListSources,
    ListDocuments,
    GetDocument,
    Search,
    Ask,
    Upload,
    ListResources,
    ReadResource,
}

const CALLS: [Call; 8] = [
    Call::ListSources,
    Call::ListDocuments,
    Call::GetDocument,
    Call::Search,
    Call::Ask,
    Call::Upload,
    Call::ListResources,
    Call::ReadResource,
];

impl Call {
    fn targets(self) -> &'static [Target] {
        match self {
            Call::ListSources | Call::ListResources => &[NoId],
            Call::ListDocuments | Call::Upload => &[InA, InB, Missing],
            Call::GetDocument | Call::ReadResource => DOCUMENT_TARGETS,
            Call::Search => SEARCH_TARGETS,
            Call::Ask => QUESTION_TARGETS,
        }
    }

    fn needs(self) -> Permission {
        match self {
            Call::Upload => Permission::ReadWrite,
            _ => Permission::Read,
        }
    }
}

/// What an MCP request comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Refused before the protocol, with this HTTP status.
    Http(StatusCode),
    /// A result (for a tool, one without `isError`).
    Done,
    /// A tool result with `isError` and this code.
    ToolError(String),
    /// A JSON-RPC error with this code.
    RpcError(i64),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Http(status) => write!(f, "HTTP {}", status.as_u16()),
            Outcome::Done => f.write_str("a result"),
            Outcome::ToolError(code) => write!(f, "tool error {code}"),
            Outcome::RpcError(code) => write!(f, "JSON-RPC error {code}"),
        }
    }
}

/// docs/mcp.md's rules: a key (401), then its level (`forbidden`), then the scope.
fn expected(caller: Caller, call: Call, target: Target) -> Outcome {
    let Caller::Key(level, reach) = caller else {
        return Outcome::Http(StatusCode::UNAUTHORIZED);
    };
    if level < call.needs() {
        Outcome::ToolError("forbidden".into())
    } else if target.visible(reach) {
        Outcome::Done
    } else if call == Call::ReadResource {
        Outcome::RpcError(-32002)
    } else {
        Outcome::ToolError("not_found".into())
    }
}

/// The JSON-RPC method and params of a call.
fn request(world: &mut World, caller: Caller, call: Call, target: Target) -> (&'static str, Value) {
    let beyond_a = !caller.scoped() && call == Call::Upload && target == InB;
    let tag = if beyond_a { "bravo" } else { "note" };
    let tool = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    let with_sources = |world: &World, mut arguments: Value| {
        if let Some(ids) = world.source_ids(target) {
            arguments["sourceIds"] = ids;
        }
        arguments
    };
    match call {
        Call::ListSources => ("tools/call", tool("list_sources", json!({}))),
        Call::ListDocuments => (
            "tools/call",
            tool(
                "list_documents",
                json!({"sourceId": world.source_of(target)}),
            ),
        ),
        Call::GetDocument => {
            let (source, document) = world.document(target);
            let arguments = json!({"sourceId": source, "documentId": document});
            ("tools/call", tool("get_document", arguments))
        }
        Call::Search => {
            let arguments = with_sources(world, json!({"query": QUERY}));
            ("tools/call", tool("search", arguments))
        }
        Call::Ask => {
            let mut arguments = with_sources(world, json!({"question": QUERY}));
            if let Some(id) = world.conversation(caller, target) {
                arguments["conversationId"] = json!(id);
            }
            ("tools/call", tool("ask", arguments))
        }
        Call::Upload => {
            let n = world.next();
            let arguments = json!({
                "sourceId": world.source_of(target),
                "name": format!("{tag}-mcp-{n}.md"),
                "text": format!("{tag} note sent over MCP, number {n}"),
            });
            ("tools/call", tool("upload_document", arguments))
        }
        Call::ListResources => ("resources/list", json!({})),
        Call::ReadResource => {
            let (source, document) = world.document(target);
            let uri = format!("quire://sources/{source}/documents/{document}");
            ("resources/read", json!({"uri": uri}))
        }
    }
}

/// The outcome of an answer, and its message with ids masked (for "answered alike").
fn outcome(status: StatusCode, text: &str) -> (Outcome, String) {
    if status != StatusCode::OK {
        return (Outcome::Http(status), String::new());
    }
    let Some(answer) = json_rpc_answer(text) else {
        return (
            Outcome::Http(status),
            format!("no JSON-RPC answer in {text}"),
        );
    };
    if let Some(error) = answer.get("error") {
        let message = mask_ids(error["message"].as_str().unwrap_or_default());
        return (
            Outcome::RpcError(error["code"].as_i64().unwrap_or(0)),
            message,
        );
    }
    let result = &answer["result"];
    if result["isError"] == true {
        let error = &result["structuredContent"]["error"];
        let message = mask_ids(error["message"].as_str().unwrap_or_default());
        let code = error["code"].as_str().unwrap_or("?").to_owned();
        return (Outcome::ToolError(code), message);
    }
    (Outcome::Done, String::new())
}

/// Runs the MCP table; returns how many combinations it checked.
pub(super) async fn check(world: &mut World, mismatches: &mut Vec<String>) -> usize {
    let mut answers: HashMap<(Caller, Call, Target), (Outcome, String)> = HashMap::new();
    let mut checked = 0;
    for caller in callers() {
        for call in CALLS {
            for &target in call.targets() {
                checked += 1;
                let (method, params) = request(world, caller, call, target);
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
                let request = world
                    .server
                    .client
                    .post(world.server.url("/mcp"))
                    .header(ACCEPT, "application/json, text/event-stream")
                    .json(&body);
                let response = world.authorise(request, caller).send().await.unwrap();
                let status = response.status();
                let text = response.text().await.unwrap();
                let (got, message) = outcome(status, &text);
                let want = expected(caller, call, target);
                let what = format!("MCP {method} {params} as {caller}");
                if got != want {
                    let text: String = text.chars().take(300).collect();
                    mismatches.push(format!("{what}: expected {want}, got {got} ({text})"));
                }
                if caller.scoped() {
                    for leak in world.leaks(&text, &params.to_string()) {
                        mismatches.push(format!("{what} leaks {leak}"));
                    }
                } else if call == Call::Upload && target == InB && got == Outcome::Done {
                    world.remember_beyond_a(&text);
                }
                answers.insert((caller, call, target), (got, message));
            }
        }
    }
    // Out of scope, or another key's, is answered exactly like nonexistent.
    for ((caller, call, target), answer) in &answers {
        let Some(twin) = target.twin() else {
            continue;
        };
        if expected(*caller, *call, *target) != expected(*caller, *call, twin) {
            continue;
        }
        let other = &answers[&(*caller, *call, twin)];
        if answer != other {
            mismatches.push(format!(
                "MCP {call:?} as {caller}: {target:?} answered {} `{}` but {twin:?} {} `{}`",
                answer.0, answer.1, other.0, other.1
            ));
        }
    }
    checked
}
