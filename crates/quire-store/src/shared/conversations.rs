//! Conversations with the generate endpoint. A conversation belongs to the key that asked its
//! first question; adding a message checks that owner and writes in one transaction, so two
//! keys racing for a new conversation id cannot both end up in it.

use quire_core::{ConversationId, KeyId};
use uuid::Uuid;

use super::Backend;
use super::records::{self, CONVERSATION_COLUMNS, MESSAGE_COLUMNS};
use super::sql::{Arg, Cells, Query, Sql};
use crate::{ConversationRecord, MessageRecord, NewMessage, StoreError, StoreResult};

/// [`crate::Store::add_message`].
pub(crate) async fn add_message<B: Backend>(
    store: &B,
    message: NewMessage,
) -> StoreResult<MessageRecord> {
    let conversation = message.conversation_id;
    let mut tx = store.begin_write().await?;
    // The key check turns an unknown key into `Invalid` rather than a foreign-key error; of
    // two keys racing for a new id, the second waits here for the first and then does nothing.
    tx.execute(
        Query::new(
            "INSERT INTO conversations (id, key_id, created_at, updated_at)
             SELECT $1, $2, $3, $3 WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = $2)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(conversation)
        .bind(message.key_id)
        .bind(message.created_at),
    )
    .await?;
    // FOR UPDATE: messages of one conversation are added one transaction at a time.
    let owner: Option<Uuid> = tx
        .fetch_optional(
            Query::new(format!(
                "SELECT key_id FROM conversations WHERE id = $1 {}",
                B::lock("FOR UPDATE")
            ))
            .bind(conversation),
        )
        .await?
        .map(|row| row.uuid("key_id"))
        .transpose()?;
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
    tx.execute(
        Query::new(
            "INSERT INTO messages (id, conversation_id, question, answer, citations, generator,
                                   created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(message.id)
        .bind(conversation)
        .bind(Arg::LongText(message.question.clone()))
        .bind(Arg::LongText(message.answer.clone()))
        .bind(&message.citations)
        .bind(&message.generator)
        .bind(message.created_at),
    )
    .await?;
    // The larger of the two: a message stamped by a node with a slower clock does not move it
    // back.
    tx.execute(
        Query::new(format!(
            "UPDATE conversations SET updated_at = {}(updated_at, $1) WHERE id = $2",
            B::GREATEST
        ))
        .bind(message.created_at)
        .bind(conversation),
    )
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

/// [`crate::Store::get_conversation`].
pub(crate) async fn get<B: Backend>(
    store: &B,
    id: ConversationId,
) -> StoreResult<Option<ConversationRecord>> {
    let query = Query::new(format!(
        "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = $1"
    ))
    .bind(id);
    let row = store.read().await?.fetch_optional(query).await?;
    row.as_ref().map(records::conversation).transpose()
}

/// [`crate::Store::recent_messages`].
pub(crate) async fn recent_messages<B: Backend>(
    store: &B,
    id: ConversationId,
    limit: u32,
) -> StoreResult<Vec<MessageRecord>> {
    // The newest `limit` rows, turned back into reading order.
    let query = Query::new(format!(
        "SELECT * FROM (
             SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = $1
             ORDER BY created_at DESC, seq DESC LIMIT $2) newest
         ORDER BY created_at, seq"
    ))
    .bind(id)
    .bind(limit);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::message).collect()
}

/// [`crate::Store::list_conversations`].
pub(crate) async fn list<B: Backend>(
    store: &B,
    key_id: KeyId,
    limit: u32,
) -> StoreResult<Vec<ConversationRecord>> {
    let query = Query::new(format!(
        "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.key_id = $1
         ORDER BY c.updated_at DESC, c.{} DESC LIMIT $2",
        B::SEQ
    ))
    .bind(key_id)
    .bind(limit);
    let rows = store.read().await?.fetch_all(query).await?;
    rows.iter().map(records::conversation).collect()
}
