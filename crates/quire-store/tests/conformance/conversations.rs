//! Conversations: owned by the key that started them, their recent messages oldest first,
//! listed per key newest first, and message text kept exactly.

use chrono::{DateTime, Duration, Utc};
use quire_core::{ConversationId, KeyId, MessageId};
use quire_store::{NewMessage, Store, StoreError};

use crate::fixtures::{key, t0};

fn message(
    conversation_id: ConversationId,
    key_id: KeyId,
    question: &str,
    created_at: DateTime<Utc>,
) -> NewMessage {
    NewMessage {
        id: MessageId::new(),
        conversation_id,
        key_id,
        question: question.into(),
        answer: format!("answer to {question}"),
        citations: "[]".into(),
        generator: "extractive".into(),
        created_at,
    }
}

async fn questions(store: &dyn Store, id: ConversationId, limit: u32) -> Vec<String> {
    store
        .recent_messages(id, limit)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.question)
        .collect()
}

pub(super) async fn conversations_belong_to_the_key_that_started_them(store: &dyn Store) {
    let owner = key(store, "owner").await;
    let other = key(store, "other").await;
    let id = ConversationId::new();
    assert!(store.get_conversation(id).await.unwrap().is_none());
    assert!(store.recent_messages(id, 10).await.unwrap().is_empty());

    let first = message(id, owner, "first?", t0());
    let stored = store.add_message(first.clone()).await.unwrap();
    assert_eq!(
        (stored.id, stored.conversation_id, stored.created_at),
        (first.id, id, t0())
    );
    let created = store.get_conversation(id).await.unwrap().unwrap();
    assert_eq!(
        (created.id, created.key_id, created.message_count),
        (id, owner, 1)
    );
    assert_eq!((created.created_at, created.updated_at), (t0(), t0()));

    let later = t0() + Duration::minutes(1);
    store
        .add_message(message(id, owner, "second?", later))
        .await
        .unwrap();
    let continued = store.get_conversation(id).await.unwrap().unwrap();
    assert_eq!(
        (
            continued.created_at,
            continued.updated_at,
            continued.message_count
        ),
        (t0(), later, 2)
    );
    assert_eq!(questions(store, id, 10).await, ["first?", "second?"]);

    let intruder = message(id, other, "mine now?", later + Duration::minutes(1));
    let refused = store.add_message(intruder.clone()).await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("belongs to another key")),
        "{refused:?}"
    );
    assert_eq!(
        store.get_conversation(id).await.unwrap().unwrap(),
        continued,
        "nothing written: same count and updated_at"
    );
    assert_eq!(questions(store, id, 10).await, ["first?", "second?"]);
    assert!(
        store
            .list_conversations(other, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A key that is not stored cannot start a conversation either.
    let orphan = ConversationId::new();
    let unknown = store
        .add_message(message(orphan, KeyId::new(), "anyone?", t0()))
        .await;
    assert!(
        matches!(unknown, Err(StoreError::Invalid(_))),
        "{unknown:?}"
    );
    assert!(store.get_conversation(orphan).await.unwrap().is_none());
}

pub(super) async fn recent_messages_are_the_last_ones_oldest_first(store: &dyn Store) {
    let owner = key(store, "k").await;
    let id = ConversationId::new();
    for i in 0..5 {
        store
            .add_message(message(
                id,
                owner,
                &format!("q{i}"),
                t0() + Duration::seconds(i),
            ))
            .await
            .unwrap();
    }
    assert_eq!(
        questions(store, id, 10).await,
        ["q0", "q1", "q2", "q3", "q4"]
    );
    assert_eq!(
        questions(store, id, 5).await,
        ["q0", "q1", "q2", "q3", "q4"]
    );
    assert_eq!(
        questions(store, id, 2).await,
        ["q3", "q4"],
        "keeps the last"
    );
    assert_eq!(questions(store, id, 1).await, ["q4"]);
    assert!(questions(store, id, 0).await.is_empty());

    // Messages stamped in the same millisecond keep the order they were added in, whatever
    // their ids: insert them in descending id order so sorting by id would reverse them.
    let same = ConversationId::new();
    let mut ids: Vec<MessageId> = (0..6).map(|_| MessageId::new()).collect();
    ids.sort();
    ids.reverse();
    for (i, message_id) in ids.iter().enumerate() {
        store
            .add_message(NewMessage {
                id: *message_id,
                ..message(same, owner, &format!("s{i}"), t0())
            })
            .await
            .unwrap();
    }
    let recent = store.recent_messages(same, 4).await.unwrap();
    assert_eq!(
        recent.iter().map(|m| m.id).collect::<Vec<_>>(),
        ids[2..].to_vec()
    );
    assert_eq!(
        recent
            .iter()
            .map(|m| m.question.as_str())
            .collect::<Vec<_>>(),
        ["s2", "s3", "s4", "s5"]
    );
    assert_eq!(
        questions(store, id, 10).await.len(),
        5,
        "conversations stay apart"
    );
}

pub(super) async fn conversations_are_listed_per_key_newest_first(store: &dyn Store) {
    let a = key(store, "a").await;
    let b = key(store, "b").await;
    let (old, new, theirs) = (
        ConversationId::new(),
        ConversationId::new(),
        ConversationId::new(),
    );
    store.add_message(message(old, a, "1", t0())).await.unwrap();
    store
        .add_message(message(new, a, "2", t0() + Duration::minutes(1)))
        .await
        .unwrap();
    store
        .add_message(message(theirs, b, "3", t0() + Duration::minutes(2)))
        .await
        .unwrap();
    let listed = |key_id, limit| async move {
        store
            .list_conversations(key_id, limit)
            .await
            .unwrap()
            .iter()
            .map(|c| c.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(a, 10).await, [new, old]);
    assert_eq!(listed(b, 10).await, [theirs]);

    // Continuing the older conversation makes it the most recently updated.
    let resumed = t0() + Duration::minutes(3);
    store
        .add_message(message(old, a, "4", resumed))
        .await
        .unwrap();
    assert_eq!(listed(a, 10).await, [old, new]);
    assert_eq!(listed(a, 1).await, [old]);
    assert!(listed(a, 0).await.is_empty());
    assert!(listed(KeyId::new(), 10).await.is_empty());
    let record = &store.list_conversations(a, 1).await.unwrap()[0];
    assert_eq!(
        (
            record.key_id,
            record.created_at,
            record.updated_at,
            record.message_count
        ),
        (a, t0(), resumed, 2)
    );
}

pub(super) async fn message_text_round_trips_exactly(store: &dyn Store) {
    let owner = key(store, "k").await;
    let id = ConversationId::new();
    let citations =
        r#"[{"documentId":"d","sourceName":"Zürich ✓","quote":"«naïve» — 日本語 🦀\n\t\"x\""}]"#;
    let long_answer: String = "Ünïcödé answer 🦀 line\n".repeat(100 * 1024 / 24 + 1);
    assert!(long_answer.len() > 100 * 1024);
    let new = NewMessage {
        question: "Wie geht's? 你好 \u{0} nul and  trailing space ".into(),
        answer: long_answer.clone(),
        citations: citations.into(),
        generator: "qwen2.5-0.5b-instruct".into(),
        ..message(id, owner, "", t0())
    };
    let stored = store.add_message(new.clone()).await.unwrap();
    let read = store.recent_messages(id, 1).await.unwrap();
    assert_eq!(read, vec![stored.clone()]);
    let read = &read[0];
    assert_eq!(read.question, new.question);
    assert_eq!(read.answer, long_answer);
    assert_eq!(read.citations, citations);
    assert_eq!(read.generator, "qwen2.5-0.5b-instruct");
    assert_eq!((read.id, read.created_at), (new.id, t0()));
}
