//! Conversations with the generate endpoint. A conversation belongs to the key that asked its
//! first question; adding a message checks that owner and writes in one transaction, so two
//! keys racing for a new conversation id cannot both end up in it.

use quire_core::{ConversationId, KeyId};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::codec;
use crate::{ConversationRecord, MessageRecord, NewMessage, StoreError, StoreResult};

const CONVERSATION_COLUMNS: &str = "c.id, c.key_id, c.created_at, c.updated_at, \
     (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count";

const MESSAGE_COLUMNS: &str =
    "id, conversation_id, question, answer, citations, generator, created_at, seq";

pub(super) async fn add_message(pool: &PgPool, message: NewMessage) -> StoreResult<MessageRecord> {
    let conversation = message.conversation_id.0;
    let mut tx = pool.begin().await?;
    // The key check turns an unknown key into `Invalid` rather than a foreign-key error; of
    // two keys racing for a new id, the second waits here for the first and then does nothing.
    sqlx::query(
        "INSERT INTO conversations (id, key_id, created_at, updated_at)
         SELECT $1, $2, $3, $3 WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = $2)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(conversation)
    .bind(message.key_id.0)
    .bind(message.created_at)
    .execute(&mut *tx)
    .await?;
    // FOR UPDATE: messages of one conversation are added one transaction at a time.
    let owner: Option<Uuid> =
        sqlx::query_scalar("SELECT key_id FROM conversations WHERE id = $1 FOR UPDATE")
            .bind(conversation)
            .fetch_optional(&mut *tx)
            .await?;
    let refusal = match owner {
        None => Some(format!("key {} does not exist", message.key_id)),
        Some(owner) if KeyId::from(owner) != message.key_id => Some(format!(
            "conversation {} belongs to another key",
            message.conversation_id
        )),
        Some(_) => None,
    };
    if let Some(refusal) = refusal {
        tx.rollback().await?;
        return Err(StoreError::Invalid(refusal));
    }
    sqlx::query(
        "INSERT INTO messages (id, conversation_id, question, answer, citations, generator,
                               created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(message.id.0)
    .bind(conversation)
    .bind(message.question.as_bytes())
    .bind(message.answer.as_bytes())
    .bind(&message.citations)
    .bind(&message.generator)
    .bind(message.created_at)
    .execute(&mut *tx)
    .await?;
    // GREATEST: a message stamped by a node with a slower clock does not move it back.
    sqlx::query("UPDATE conversations SET updated_at = GREATEST(updated_at, $1) WHERE id = $2")
        .bind(message.created_at)
        .bind(conversation)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(MessageRecord {
        id: message.id,
        conversation_id: message.conversation_id,
        question: message.question,
        answer: message.answer,
        citations: message.citations,
        generator: message.generator,
        created_at: message.created_at,
    })
}

pub(super) async fn get(
    pool: &PgPool,
    id: ConversationId,
) -> StoreResult<Option<ConversationRecord>> {
    let row = sqlx::query(&format!(
        "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = $1"
    ))
    .bind(id.0)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(conversation_from_row).transpose()
}

pub(super) async fn recent_messages(
    pool: &PgPool,
    id: ConversationId,
    limit: u32,
) -> StoreResult<Vec<MessageRecord>> {
    // The newest `limit` rows, turned back into reading order.
    let rows = sqlx::query(&format!(
        "SELECT * FROM (
             SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = $1
             ORDER BY created_at DESC, seq DESC LIMIT $2) newest
         ORDER BY created_at, seq"
    ))
    .bind(id.0)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter().map(message_from_row).collect()
}

pub(super) async fn list(
    pool: &PgPool,
    key_id: KeyId,
    limit: u32,
) -> StoreResult<Vec<ConversationRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.key_id = $1
         ORDER BY c.updated_at DESC, c.seq DESC LIMIT $2"
    ))
    .bind(key_id.0)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter().map(conversation_from_row).collect()
}

fn conversation_from_row(row: &PgRow) -> StoreResult<ConversationRecord> {
    Ok(ConversationRecord {
        id: row.try_get::<Uuid, _>("id")?.into(),
        key_id: row.try_get::<Uuid, _>("key_id")?.into(),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        message_count: codec::small(row.try_get("message_count")?),
    })
}

/// Questions and answers are stored as UTF-8 bytes (TEXT cannot hold U+0000).
fn text(row: &PgRow, column: &str) -> StoreResult<String> {
    String::from_utf8(row.try_get(column)?)
        .map_err(|e| StoreError::Corrupt(format!("message {column} is not UTF-8: {e}")))
}

fn message_from_row(row: &PgRow) -> StoreResult<MessageRecord> {
    Ok(MessageRecord {
        id: row.try_get::<Uuid, _>("id")?.into(),
        conversation_id: row.try_get::<Uuid, _>("conversation_id")?.into(),
        question: text(row, "question")?,
        answer: text(row, "answer")?,
        citations: row.try_get("citations")?,
        generator: row.try_get("generator")?,
        created_at: row.try_get("created_at")?,
    })
}
