//! `quire keys create|list|revoke`: API key management from the command line, through the
//! same use cases as the admin interface (acting as the operator, so creating and revoking a
//! key are recorded in the audit log). These commands only open the database, so they work
//! while `quire serve` runs on the same data directory.

use quire_core::wire_timestamp as iso;
use std::fmt::Write as _;

use anyhow::{Context, bail};
use quire_app::keys::KeySpec;
use quire_app::{Actor, AppError, Ledger};
use quire_core::{ApiKeyRecord, KeyId, Permission, SourceId, SourceScope};
use serde_json::{Value, json};

/// Arguments of `keys create`.
#[derive(Debug, Clone)]
pub struct CreateArgs {
    /// Label.
    pub name: String,
    /// Permission level.
    pub permission: Permission,
    /// Source ids, or `None` for all sources.
    pub sources: Option<Vec<String>>,
    /// Requests per minute.
    pub rate_limit: Option<u32>,
}

fn sources_json(scope: &SourceScope) -> Value {
    match scope.source_ids() {
        None => Value::Null,
        Some(ids) => ids.iter().map(|id| Value::String(id.to_string())).collect(),
    }
}

/// The JSON form of a key record, as `keys list --json` prints it.
pub fn key_json(key: &ApiKeyRecord) -> Value {
    json!({
        "id": key.id.to_string(),
        "name": key.name,
        "permission": key.permission.as_str(),
        "sources": sources_json(&key.scope),
        "rateLimit": key.rate_limit,
        "createdAt": iso(key.created_at),
        "lastUsedAt": key.last_used_at.map(iso),
        "revokedAt": key.revoked_at.map(iso),
    })
}

/// Creates a key and returns what to print.
pub async fn create(ledger: &Ledger, args: CreateArgs, as_json: bool) -> anyhow::Result<String> {
    let name = args.name.trim().to_owned();
    if name.is_empty() {
        bail!("--name must not be empty");
    }
    if args.rate_limit == Some(0) {
        bail!("--rate-limit must be at least 1");
    }
    let scope = match &args.sources {
        None => SourceScope::All,
        Some(raw) => {
            let ids = raw
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<SourceId>()
                        .with_context(|| format!("{s:?} is not a source id (UUID)"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            if ids.is_empty() {
                bail!("--sources needs at least one source id");
            }
            SourceScope::only(ids)
        }
    };
    let spec = KeySpec {
        name,
        permission: args.permission,
        scope,
        rate_limit: args.rate_limit,
    };
    let (key, secret) = match quire_app::keys::create(ledger, &Actor::Operator, spec).await {
        Ok(issued) => issued,
        Err(AppError::Invalid(message)) => bail!("{message}"),
        Err(e) => return Err(e.into()),
    };
    if as_json {
        let mut value = key_json(&key);
        value["key"] = Value::String(secret.expose().clone());
        return Ok(serde_json::to_string_pretty(&value)?);
    }
    let mut out = String::new();
    writeln!(out, "Created API key {:?} ({})", key.name, key.id)?;
    writeln!(out, "  permission: {}", key.permission)?;
    writeln!(out, "  sources:    {}", scope_text(&key.scope))?;
    writeln!(out, "  rate limit: {}", rate_text(key.rate_limit))?;
    writeln!(out)?;
    writeln!(out, "Key (shown only this once; store it now):")?;
    write!(out, "{}", secret.expose())?;
    Ok(out)
}

/// Lists keys.
pub async fn list(ledger: &Ledger, as_json: bool) -> anyhow::Result<String> {
    let keys = quire_app::keys::list(ledger).await?;
    if as_json {
        let all: Vec<Value> = keys.iter().map(key_json).collect();
        return Ok(serde_json::to_string_pretty(&all)?);
    }
    if keys.is_empty() {
        return Ok(
            "No API keys. Create one with `quire keys create --name NAME --permission read`."
                .into(),
        );
    }
    let mut out = format!(
        "{:<36}  {:<10}  {:<8}  {:<10}  {:<20}  {}\n",
        "ID", "PERMISSION", "STATUS", "RATE", "CREATED", "NAME (SOURCES)"
    );
    for key in &keys {
        writeln!(
            out,
            "{:<36}  {:<10}  {:<8}  {:<10}  {:<20}  {} ({})",
            key.id,
            key.permission,
            if key.revoked_at.is_some() {
                "revoked"
            } else {
                "active"
            },
            rate_text(key.rate_limit),
            key.created_at.format("%Y-%m-%d %H:%M:%S"),
            key.name,
            scope_text(&key.scope),
        )?;
    }
    Ok(out.trim_end().to_owned())
}

/// Revokes a key.
pub async fn revoke(ledger: &Ledger, id: &str, as_json: bool) -> anyhow::Result<String> {
    let id: KeyId = id
        .parse()
        .with_context(|| format!("{id:?} is not a key id (UUID)"))?;
    let key = match quire_app::keys::revoke(ledger, &Actor::Operator, id).await {
        Ok(key) => key,
        Err(AppError::NotFound(message)) => bail!("{message}"),
        Err(e) => return Err(e.into()),
    };
    if as_json {
        return Ok(serde_json::to_string_pretty(&key_json(&key))?);
    }
    Ok(format!("Revoked API key {:?} ({})", key.name, key.id))
}

fn scope_text(scope: &SourceScope) -> String {
    match scope.source_ids() {
        None => "all".into(),
        Some(ids) => ids
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn rate_text(limit: Option<u32>) -> String {
    limit.map_or_else(|| "default".into(), |n| format!("{n}/min"))
}
