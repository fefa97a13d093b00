//! Rows to records, once for both dialects: the columns each record is read from and how.

use std::collections::BTreeSet;
use std::str::FromStr;

use quire_core::{
    ApiKeyRecord, ChunkDraft, DocumentRecord, DocumentStatus, ExternalId, NextVersion, Permission,
    SourceId, SourceRecord, SourceScope, VersionRecord, VersionStatus, WebhookEvent,
};

use super::sql::Cells;
use crate::{
    AuditEntry, ConversationRecord, DeliveryAttempt, MessageRecord, PendingDelivery,
    ReviewDecision, ReviewRecord, StoreError, StoreResult, WebhookRecord,
};

/// A source's columns, with its document count, for [`source`].
pub(crate) const SOURCE_COLUMNS: &str = "s.id, s.name, s.description, s.source_type, \
     s.created_at, (SELECT COUNT(*) FROM documents d WHERE d.source_id = s.id) AS document_count";

/// A source.
pub(crate) fn source(row: &impl Cells) -> StoreResult<SourceRecord> {
    Ok(SourceRecord {
        id: row.id("id")?,
        name: row.text("name")?,
        description: row.text("description")?,
        source_type: row.text("source_type")?,
        document_count: row.count("document_count")?,
        created_at: row.time("created_at")?,
    })
}

/// A document's columns (table alias `d`), with the newest version after the live one that
/// is not superseded, when there is one, for [`document`].
pub(crate) const DOCUMENT_COLUMNS: &str = "d.id, d.source_id, d.name, d.status, d.error, \
     d.chunk_count, d.page_count, d.size, d.content_type, d.sha256, d.metadata, d.external_id, \
     d.version, d.index_id, d.previous_index_id, d.created_at, d.updated_at, \
     (SELECT v.version FROM document_versions v WHERE v.document_id = d.id \
      AND v.version > d.version AND v.status <> 'superseded' \
      ORDER BY v.version DESC LIMIT 1) AS next_version, \
     (SELECT v.status FROM document_versions v WHERE v.document_id = d.id \
      AND v.version > d.version AND v.status <> 'superseded' \
      ORDER BY v.version DESC LIMIT 1) AS next_status, \
     (SELECT v.error FROM document_versions v WHERE v.document_id = d.id \
      AND v.version > d.version AND v.status <> 'superseded' \
      ORDER BY v.version DESC LIMIT 1) AS next_error";

/// A document.
pub(crate) fn document(row: &impl Cells) -> StoreResult<DocumentRecord> {
    let next_version = match row.opt_int("next_version")? {
        Some(version) => Some(NextVersion {
            version: version_number(version)?,
            status: version_status(&row.text("next_status")?)?,
            error: row.opt_text("next_error")?,
        }),
        None => None,
    };
    Ok(DocumentRecord {
        id: row.id("id")?,
        source_id: row.id("source_id")?,
        name: row.text("name")?,
        status: status(&row.text("status")?)?,
        error: row.opt_text("error")?,
        chunk_count: row.count("chunk_count")?,
        page_count: row.count("page_count")?,
        size: row.count("size")?,
        content_type: row.text("content_type")?,
        sha256: row.text("sha256")?,
        metadata: quire_core::Metadata::from_stored(&row.text("metadata")?)
            .map_err(|e| StoreError::Corrupt(e.0))?,
        external_id: row
            .opt_text("external_id")?
            .map(|raw| ExternalId::parse(&raw).map_err(|e| StoreError::Corrupt(e.0)))
            .transpose()?,
        version: version_number(row.int("version")?)?,
        index_id: row.id("index_id")?,
        previous_index_id: row.opt_id("previous_index_id")?,
        next_version,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// A version's columns (alias `v`), for [`version`].
pub(crate) const VERSION_COLUMNS: &str = "v.version, v.index_id, v.name, v.size, \
     v.content_type, v.sha256, v.status, v.error, v.created_at";

/// One version of a document.
pub(crate) fn version(row: &impl Cells) -> StoreResult<VersionRecord> {
    Ok(VersionRecord {
        version: version_number(row.int("version")?)?,
        index_id: row.id("index_id")?,
        name: row.text("name")?,
        size: row.count("size")?,
        content_type: row.text("content_type")?,
        sha256: row.text("sha256")?,
        status: version_status(&row.text("status")?)?,
        error: row.opt_text("error")?,
        created_at: row.time("created_at")?,
    })
}

/// A stored version number.
pub(crate) fn version_number(raw: i64) -> StoreResult<u32> {
    u32::try_from(raw)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| StoreError::Corrupt(format!("version number {raw}")))
}

/// A stored version status.
pub(crate) fn version_status(raw: &str) -> StoreResult<VersionStatus> {
    VersionStatus::from_str(raw).map_err(StoreError::Corrupt)
}

/// A stored document status.
pub(crate) fn status(raw: &str) -> StoreResult<DocumentStatus> {
    DocumentStatus::from_str(raw).map_err(StoreError::Corrupt)
}

/// A chunk (`ordinal`, `page`, `section`, `content`).
pub(crate) fn chunk(row: &impl Cells) -> StoreResult<ChunkDraft> {
    Ok(ChunkDraft {
        ordinal: row.small("ordinal")?,
        page: row.small("page")?,
        section: row.text("section")?,
        content: row.text("content")?,
    })
}

/// An API key's columns, for [`key`].
pub(crate) const KEY_COLUMNS: &str =
    "id, name, permission, all_sources, rate_limit, created_at, last_used_at, revoked_at";

/// An API key, whose scope (unless it has every source) is `sources`.
pub(crate) fn key(row: &impl Cells, sources: BTreeSet<SourceId>) -> StoreResult<ApiKeyRecord> {
    let permission = row.text("permission")?;
    Ok(ApiKeyRecord {
        id: row.id("id")?,
        name: row.text("name")?,
        permission: permission
            .parse::<Permission>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        scope: if row.bool("all_sources")? {
            SourceScope::All
        } else {
            SourceScope::Only(sources)
        },
        rate_limit: row
            .opt_int("rate_limit")?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        created_at: row.time("created_at")?,
        last_used_at: row.opt_time("last_used_at")?,
        revoked_at: row.opt_time("revoked_at")?,
    })
}

/// A conversation's columns (alias `c`), with its message count, for [`conversation`].
pub(crate) const CONVERSATION_COLUMNS: &str = "c.id, c.key_id, c.created_at, c.updated_at, \
     (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count";

/// A conversation.
pub(crate) fn conversation(row: &impl Cells) -> StoreResult<ConversationRecord> {
    Ok(ConversationRecord {
        id: row.id("id")?,
        key_id: row.id("key_id")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        message_count: row.small("message_count")?,
    })
}

/// A message's columns, for [`message`].
pub(crate) const MESSAGE_COLUMNS: &str =
    "id, conversation_id, question, answer, citations, generator, created_at, seq";

/// A generated answer.
pub(crate) fn message(row: &impl Cells) -> StoreResult<MessageRecord> {
    Ok(MessageRecord {
        id: row.id("id")?,
        conversation_id: row.id("conversation_id")?,
        question: row.long_text("question")?,
        answer: row.long_text("answer")?,
        citations: row.text("citations")?,
        generator: row.text("generator")?,
        created_at: row.time("created_at")?,
    })
}

/// A webhook's columns, for [`webhook`].
pub(crate) const WEBHOOK_COLUMNS: &str = "id, url, events, secret, source_ids, created_at";

/// The webhook in `row`, whose columns carry `prefix` (claims select them beside the event's).
pub(crate) fn webhook(row: &impl Cells, prefix: &str) -> StoreResult<WebhookRecord> {
    let column = |name: &str| format!("{prefix}{name}");
    let events = row.text(&column("events"))?;
    let events: Vec<WebhookEvent> = serde_json::from_str(&events)
        .map_err(|e| StoreError::Corrupt(format!("webhook events {events:?}: {e}")))?;
    Ok(WebhookRecord {
        id: row.id(&column("id"))?,
        url: row.text(&column("url"))?,
        events,
        secret: row.text(&column("secret"))?,
        scope: match row.opt_ids(&column("source_ids"))? {
            None => SourceScope::All,
            Some(ids) => SourceScope::only(ids.into_iter().map(SourceId::from)),
        },
        created_at: row.time(&column("created_at"))?,
    })
}

/// An outbox row (`event_id`, `event`, `body`, `created_at`) for `webhook`.
pub(crate) fn pending_delivery(
    row: &impl Cells,
    webhook: WebhookRecord,
) -> StoreResult<PendingDelivery> {
    Ok(PendingDelivery {
        event_id: row.id("event_id")?,
        webhook,
        event: event(&row.text("event")?)?,
        body: row.text("body")?,
        created_at: row.time("created_at")?,
    })
}

/// A stored event name.
pub(crate) fn event(raw: &str) -> StoreResult<WebhookEvent> {
    raw.parse()
        .map_err(|e: quire_core::UnknownWebhookEvent| StoreError::Corrupt(e.to_string()))
}

/// A logged delivery attempt.
pub(crate) fn attempt(row: &impl Cells) -> StoreResult<DeliveryAttempt> {
    let status_code = row
        .opt_int("status_code")?
        .map(|code| {
            u16::try_from(code)
                .map_err(|_| StoreError::Corrupt(format!("HTTP status {code} out of range")))
        })
        .transpose()?;
    Ok(DeliveryAttempt {
        sequence: row.count("seq")?,
        event_id: row.id("event_id")?,
        webhook_id: row.id("webhook_id")?,
        event: event(&row.text("event")?)?,
        attempted_at: row.time("attempted_at")?,
        status_code,
        error: row.opt_text("error")?,
        latency_ms: row.count("latency_ms")?,
    })
}

/// A review's columns (alias `r`), read beside [`DOCUMENT_COLUMNS`] by [`review`].
pub(crate) const REVIEW_COLUMNS: &str =
    "r.pii_types, r.findings, r.held_at, r.decision, r.decided_at, r.held_name";

/// A document held for review, with its review.
pub(crate) fn review(row: &impl Cells) -> StoreResult<ReviewRecord> {
    Ok(ReviewRecord {
        document: document(row)?,
        pii_types: serde_json::from_str(&row.text("pii_types")?)
            .map_err(|e| StoreError::Corrupt(format!("review types: {e}")))?,
        findings: row.text("findings")?,
        held_at: row.time("held_at")?,
        decision: decision(row.opt_text("decision")?)?,
        decided_at: row.opt_time("decided_at")?,
        held_name: row.opt_text("held_name")?,
    })
}

/// A stored review decision, if one was made.
pub(crate) fn decision(raw: Option<String>) -> StoreResult<Option<ReviewDecision>> {
    raw.as_deref().map(ReviewDecision::parse).transpose()
}

/// An audit log entry.
pub(crate) fn audit(row: &impl Cells) -> StoreResult<AuditEntry> {
    Ok(AuditEntry {
        at: row.time("at")?,
        actor: row.text("actor")?,
        action: row.text("action")?,
        detail: row.text("detail")?,
    })
}
