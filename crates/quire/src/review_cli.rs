//! `quire review list|show|approve|redact|reject`: the personal-data review queue from the
//! command line. Only the database and the file area are opened, so this works while
//! `quire serve` runs: approve and redact queue the document again and the server's workers
//! finish it; reject deletes it (a held document was never indexed, so nothing else holds it).

use std::fmt::Write as _;

use anyhow::{Context, bail};
use chrono::{SecondsFormat, Utc};
use quire_core::{DocumentId, DocumentStatus, SourceScope};
use quire_files::OriginalStore;
use quire_ingest::Review;
use quire_store::{ReviewDecision, ReviewRecord, Store};
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
pub async fn list(store: &dyn Store, as_json: bool) -> anyhow::Result<String> {
    let waiting = store.pending_reviews().await?;
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
pub async fn show(store: &dyn Store, id: &str, as_json: bool) -> anyhow::Result<String> {
    let id = parse_id(id)?;
    let Some(review) = store.get_review(id).await? else {
        bail!("document {id} was never held for review");
    };
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
/// of the document's name, as `screening` (the configured policy) finds them.
pub async fn decide(
    store: &dyn Store,
    screening: &Review,
    id: &str,
    decision: ReviewDecision,
) -> anyhow::Result<String> {
    let id = parse_id(id)?;
    let Some(review) = store.get_review(id).await? else {
        bail!("document {id} was never held for review");
    };
    let decided = screening.decided(&review, decision);
    if store.decide_review(id, decided, Utc::now()).await? {
        return Ok(format!(
            "document {id} {}: queued for processing; it becomes ready when a running server's \
             worker has indexed it",
            match decision {
                ReviewDecision::Approve => "approved",
                ReviewDecision::Redact => "will be indexed redacted",
            }
        ));
    }
    match store.get_review(id).await? {
        Some(r) => bail!(
            "document {id} is not waiting for review (it is {})",
            r.document.status.as_str()
        ),
        None => bail!("document {id} was never held for review"),
    }
}

/// Deletes a held document and its original file.
pub async fn reject(
    store: &dyn Store,
    files: &dyn OriginalStore,
    id: &str,
) -> anyhow::Result<String> {
    let id = parse_id(id)?;
    let review = store
        .get_review(id)
        .await?
        .filter(|r| r.document.status == DocumentStatus::PendingReview)
        .with_context(|| format!("document {id} is not waiting for review"))?;
    store
        .delete_document(&SourceScope::All, review.document.source_id, id)
        .await?;
    if let Err(e) = files.remove(id).await {
        eprintln!("warning: could not remove the original file of {id}: {e}");
    }
    Ok(format!("document {id} rejected: deleted with its file"))
}
