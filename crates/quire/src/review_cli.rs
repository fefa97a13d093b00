//! `quire review list|show|approve|redact|reject`: the personal-data review queue from the
//! command line, through the same use cases as the REST API and the admin interface (acting
//! as the operator, so every decision is recorded in the audit log). Only the database and
//! the file area are opened, so this works while `quire serve` runs: approve and redact queue
//! the document again and the server's workers finish it; reject deletes it (a held document
//! was never indexed, so nothing else holds it).

use std::fmt::Write as _;

use anyhow::Context;
use chrono::SecondsFormat;
use quire_app::records::{ReviewDecision, ReviewRecord};
use quire_app::{Actor, Ledger, reviews};
use quire_core::{DocumentId, SourceScope};
use serde_json::{Value, json};

fn review_json(review: &ReviewRecord, with_findings: bool) -> Value {
    let findings: Value = serde_json::from_str(&review.findings).unwrap_or(Value::Null);
    let mut value = json!({
        "documentId": review.document.id.to_string(),
        "documentName": review.document.name,
        "dataSourceId": review.document.source_id.to_string(),
        "status": review.document.status.as_str(),
        "piiTypes": review.pii_types,
        "heldAt": quire_core::wire_timestamp(review.held_at),
        "decision": review.decision.map(ReviewDecision::as_str),
        "findingCount": review.finding_count(),
    });
    if with_findings {
        value["findings"] = findings;
    }
    value
}

fn parse_id(raw: &str) -> anyhow::Result<DocumentId> {
    raw.parse()
        .with_context(|| format!("{raw:?} is not a document id (a UUID)"))
}

/// Documents waiting for review.
pub async fn list(ledger: &Ledger, as_json: bool) -> anyhow::Result<String> {
    let waiting = reviews::pending(ledger, &SourceScope::All).await?;
    if as_json {
        let all: Vec<Value> = waiting.iter().map(|r| review_json(r, false)).collect();
        return Ok(serde_json::to_string_pretty(&all)?);
    }
    if waiting.is_empty() {
        return Ok("no documents are waiting for review".into());
    }
    let mut out = String::new();
    for r in &waiting {
        let _ = writeln!(
            out,
            "{}  {}  {}  held {}",
            r.document.id,
            r.document.name,
            r.pii_types.join(","),
            r.held_at.to_rfc3339_opts(SecondsFormat::Secs, true)
        );
    }
    Ok(out.trim_end().to_owned())
}

/// One held document with its findings in context.
pub async fn show(ledger: &Ledger, id: &str, as_json: bool) -> anyhow::Result<String> {
    let id = parse_id(id)?;
    let review = reviews::get(ledger, &SourceScope::All, id).await?;
    if as_json {
        return Ok(serde_json::to_string_pretty(&review_json(&review, true))?);
    }
    let mut out = format!(
        "{}  {}  ({})\ntypes: {}\n",
        review.document.id,
        review.document.name,
        review.document.status.as_str(),
        review.pii_types.join(", ")
    );
    let findings: Value = serde_json::from_str(&review.findings).unwrap_or(Value::Null);
    for f in findings.as_array().into_iter().flatten() {
        let kind = f["type"].as_str().unwrap_or("");
        if let Some(count) = f["count"].as_u64() {
            // Decided: only the reduced form is kept (type, count, masked excerpt).
            let places: Vec<&str> = f["in"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let _ = writeln!(
                out,
                "  {kind:<12} {count:>4}×  {}  (in {})",
                f["excerpt"].as_str().unwrap_or(""),
                places.join(", ")
            );
            continue;
        }
        let place = match f["page"].as_u64() {
            Some(page) => format!("page {page:>3}"),
            None => "name    ".to_owned(),
        };
        let _ = writeln!(
            out,
            "  {place}  {kind:<12} {:?}  …{}…",
            f["text"].as_str().unwrap_or(""),
            f["context"].as_str().unwrap_or("").replace('\n', " ")
        );
    }
    Ok(out.trim_end().to_owned())
}

/// Approve or redact: the document is queued again and becomes ready when a worker is done.
/// The findings are reduced to types, counts and masked excerpts, and redact takes them out
/// of the document's name, as the ledger's screening (the configured policy) finds them.
pub async fn decide(ledger: &Ledger, id: &str, decision: ReviewDecision) -> anyhow::Result<String> {
    let id = parse_id(id)?;
    reviews::decide(ledger, &Actor::Operator, id, decision).await?;
    Ok(format!(
        "document {id} {}: queued for processing; it becomes ready when a running server's \
         worker has indexed it",
        match decision {
            ReviewDecision::Approve => "approved",
            ReviewDecision::Redact => "will be indexed redacted",
        }
    ))
}

/// Deletes a held document and its original file.
pub async fn reject(ledger: &Ledger, id: &str) -> anyhow::Result<String> {
    let id = parse_id(id)?;
    reviews::reject(ledger, &Actor::Operator, id).await?;
    Ok(format!("document {id} rejected: deleted with its file"))
}
