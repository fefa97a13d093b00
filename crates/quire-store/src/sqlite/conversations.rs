//! Conversations with the generate endpoint. A conversation belongs to the key that asked its
//! first question; adding a message checks that owner and writes in one transaction, so two
//! keys racing for a new conversation id cannot both end up in it.

use quire_core::{ConversationId, KeyId};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};

use super::codec;
use crate::{ConversationRecord, MessageRecord, NewMessage, StoreError, StoreResult};

const CONVERSATION_COLUMNS: &str = "c.id, c.key_id, c.created_at, c.updated_at, \
     (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count";

const MESSAGE_COLUMNS: &str =
    "id, conversation_id, question, answer, citations, generator, created_at, seq";

pub(super) async fn add_message(
    pool: &SqlitePool,
    message: NewMessage,
) -> StoreResult<MessageRecord> {
    let conversation = message.conversation_id.to_string();
    let created_at = codec::millis(message.created_at);
    let mut tx = pool.begin().await?;
    // A write comes first so the transaction takes the write lock at once and the owner read
    // below cannot go stale. The key check turns an unknown key into `Invalid` rather than a
    // foreign-key error.
    sqlx::query(
        "INSERT INTO conversations (id, key_id, created_at, updated_at)
         SELECT ?1, ?2, ?3, ?3 WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = ?2)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&conversation)
    .bind(message.key_id.to_string())
    .bind(created_at)
    .execute(&mut *tx)
    .await?;
    let owner: Option<String> = sqlx::query("SELECT key_id FROM conversations WHERE id = ?")
        .bind(&conversation)
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("key_id"))
        .transpose()?;
    let refusal = match owner {
        None => Some(format!("key {} does not exist", message.key_id)),
        Some(owner) if codec::id::<KeyId>(&owner)? != message.key_id => Some(format!(
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
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(message.id.to_string())
    .bind(&conversation)
    .bind(&message.question)
    .bind(&message.answer)
    .bind(&message.citations)
    .bind(&message.generator)
    .bind(created_at)
    .execute(&mut *tx)
    .await?;
    // MAX: a message stamped by a process with a slower clock does not move it back.
    sqlx::query("UPDATE conversations SET updated_at = MAX(updated_at, ?) WHERE id = ?")
        .bind(created_at)
        .bind(&conversation)
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
    pool: &SqlitePool,
    id: ConversationId,
) -> StoreResult<Option<ConversationRecord>> {
    let row = sqlx::query(&format!(
        "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?"
    ))
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(conversation_from_row).transpose()
}

pub(super) async fn recent_messages(
    pool: &SqlitePool,
    id: ConversationId,
    limit: u32,
) -> StoreResult<Vec<MessageRecord>> {
    // The newest `limit` rows, turned back into reading order.
    let rows = sqlx::query(&format!(
        "SELECT * FROM (
             SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ?
             ORDER BY created_at DESC, seq DESC LIMIT ?)
         ORDER BY created_at, seq"
    ))
    .bind(id.to_string())
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter().map(message_from_row).collect()
}

pub(super) async fn list(
    pool: &SqlitePool,
    key_id: KeyId,
    limit: u32,
) -> StoreResult<Vec<ConversationRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.key_id = ?
         ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ?"
    ))
    .bind(key_id.to_string())
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.iter().map(conversation_from_row).collect()
}

fn conversation_from_row(row: &SqliteRow) -> StoreResult<ConversationRecord> {
    Ok(ConversationRecord {
        id: codec::id(&row.try_get::<String, _>("id")?)?,
        key_id: codec::id(&row.try_get::<String, _>("key_id")?)?,
        created_at: codec::time(row.try_get("created_at")?)?,
        updated_at: codec::time(row.try_get("updated_at")?)?,
        message_count: u32::try_from(row.try_get::<i64, _>("message_count")?).unwrap_or(u32::MAX),
    })
}

fn message_from_row(row: &SqliteRow) -> StoreResult<MessageRecord> {
    Ok(MessageRecord {
        id: codec::id(&row.try_get::<String, _>("id")?)?,
        conversation_id: codec::id(&row.try_get::<String, _>("conversation_id")?)?,
        question: row.try_get("question")?,
        answer: row.try_get("answer")?,
        citations: row.try_get("citations")?,
        generator: row.try_get("generator")?,
        created_at: codec::time(row.try_get("created_at")?)?,
    })
}
