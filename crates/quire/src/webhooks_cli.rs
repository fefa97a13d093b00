//! `quire webhooks list|deliveries`: registered webhooks and their delivery log, from the
//! command line, through the same use cases as the REST API (only the database is opened, so
//! this works while `quire serve` runs).

use quire_core::wire_timestamp as iso;
use std::fmt::Write as _;

use anyhow::Context;
use quire_app::records::{DeliveryAttempt, WebhookRecord};
use quire_app::{AppError, Ledger, webhooks};
use quire_core::{SourceScope, WebhookId};
use serde_json::{Value, json};

fn webhook_json(webhook: &WebhookRecord) -> Value {
    json!({
        "id": webhook.id.to_string(),
        "url": webhook.url,
        "events": webhook.events.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
        "createdAt": iso(webhook.created_at),
    })
}

fn attempt_json(attempt: &DeliveryAttempt) -> Value {
    json!({
        "eventId": attempt.event_id.to_string(),
        "event": attempt.event.as_str(),
        "attemptedAt": iso(attempt.attempted_at),
        "statusCode": attempt.status_code,
        "error": attempt.error,
        "latencyMs": attempt.latency_ms,
    })
}

/// The registered webhooks (never their secrets).
pub async fn list(ledger: &Ledger, as_json: bool) -> anyhow::Result<String> {
    let webhooks = webhooks::list(ledger, &SourceScope::All).await?;
    if as_json {
        return Ok(serde_json::to_string_pretty(
            &webhooks.iter().map(webhook_json).collect::<Vec<_>>(),
        )?);
    }
    if webhooks.is_empty() {
        return Ok("no webhooks registered".into());
    }
    let mut out = String::new();
    for w in &webhooks {
        let events: Vec<&str> = w.events.iter().map(|e| e.as_str()).collect();
        let _ = writeln!(
            out,
            "{}  {}  {}  created {}",
            w.id,
            w.url,
            events.join(","),
            iso(w.created_at)
        );
    }
    Ok(out.trim_end().to_owned())
}

/// The newest `limit` delivery attempts of one webhook.
pub async fn deliveries(
    ledger: &Ledger,
    id: &str,
    limit: u32,
    as_json: bool,
) -> anyhow::Result<String> {
    let id: WebhookId = id
        .parse()
        .with_context(|| format!("{id:?} is not a webhook id (a UUID)"))?;
    let attempts = match webhooks::deliveries(ledger, &SourceScope::All, id, limit.max(1)).await {
        Ok(attempts) => attempts,
        Err(AppError::NotFound(_)) => anyhow::bail!("no webhook {id}"),
        Err(e) => return Err(e.into()),
    };
    if as_json {
        return Ok(serde_json::to_string_pretty(
            &attempts.iter().map(attempt_json).collect::<Vec<_>>(),
        )?);
    }
    if attempts.is_empty() {
        return Ok("no deliveries yet".into());
    }
    let mut out = String::new();
    for a in &attempts {
        let outcome = match (&a.error, a.status_code) {
            (Some(error), _) => format!("failed: {error}"),
            (None, Some(status)) if (200..300).contains(&status) => format!("HTTP {status}"),
            (None, Some(status)) => format!("failed: HTTP {status}"),
            (None, None) => "failed".into(),
        };
        let _ = writeln!(
            out,
            "{}  {}  {}  {} ms  {}",
            iso(a.attempted_at),
            a.event.as_str(),
            a.event_id,
            a.latency_ms,
            outcome
        );
    }
    Ok(out.trim_end().to_owned())
}
