//! What the nodes of a shared store coordinate through: the index feed, the nodes' embedding
//! models, and the one generation queue.

use chrono::Duration;
use futures_util::future::join_all;
use quire_core::{KeyId, SourceScope};
use quire_store::{
    ChunkVectors, FinishOutcome, IndexChange, IndexChangeKind, QueueLimits, QueueRefusal, Store,
    TicketPlace,
};

use crate::fixtures::{chunks, document, source, t0};
use crate::harness::TestDb;

/// A shared store lists, in commit order, each document that became ready (with the vectors
/// its worker stored) and each that was deleted; a store one process owns has no feed.
pub(super) async fn the_index_feed_lists_what_became_ready_or_went(store: &dyn Store) {
    let s = source(store, "S").await;
    let (a, b) = (
        document(store, s, "a.txt").await,
        document(store, s, "b.txt").await,
    );
    let vectors = ChunkVectors {
        model: "test-model".into(),
        vectors: vec![vec![0.25, -1.5, 3.0e-7], vec![f32::MAX, 0.0, -0.0]],
    };
    for _ in 0..2 {
        let job = store
            .claim_job("w", t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
            .unwrap();
        let mut processed = chunks(2);
        processed.vectors = Some(vectors.clone());
        let outcome = store.finish_document(&job, processed, t0()).await.unwrap();
        assert_eq!(outcome, FinishOutcome::Stored);
    }
    store
        .delete_document(&SourceScope::All, s, a, chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    let changes = store.index_changes(0, 100).await.unwrap();
    if !store.is_shared() {
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(store.document_vectors(b).await.unwrap(), None);
        return;
    }
    let change = |position, document_id, kind| IndexChange {
        position,
        document_id,
        source_id: s,
        kind,
        index_id: document_id,
        replaced: None,
    };
    assert_eq!(
        changes,
        [
            change(1, a, IndexChangeKind::Ready),
            change(2, b, IndexChangeKind::Ready),
            change(3, a, IndexChangeKind::Removed),
        ]
    );
    assert_eq!(store.index_changes(2, 100).await.unwrap(), &changes[2..]);
    assert_eq!(store.index_changes(0, 1).await.unwrap(), &changes[..1]);
    assert!(store.index_changes(3, 100).await.unwrap().is_empty());
    // The vectors come back bit for bit, and go with their document.
    assert_eq!(store.document_vectors(b).await.unwrap(), Some(vectors));
    assert_eq!(store.document_vectors(a).await.unwrap(), None);
    // Deleting what does not exist changes nothing.
    assert!(
        store
            .delete_document(&SourceScope::All, s, a, chrono::Utc::now())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.index_changes(0, 100).await.unwrap(), changes);
}

/// Many nodes finishing and deleting at once get consecutive feed positions, each change once:
/// a follower that has read up to a position never finds a change below it appear later.
pub(super) async fn concurrent_changes_take_consecutive_feed_positions(db: &TestDb) {
    let nodes = [db.open().await, db.open().await, db.open().await];
    let s = source(&*nodes[0], "S").await;
    let mut docs = Vec::new();
    for i in 0..30 {
        docs.push(document(&*nodes[0], s, &format!("{i}.txt")).await);
    }
    let work = nodes.iter().enumerate().map(|(n, store)| async move {
        let worker = format!("node{n}");
        while let Some(job) = store
            .claim_job(&worker, t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
        {
            let outcome = store.finish_document(&job, chunks(3), t0()).await.unwrap();
            assert_eq!(outcome, FinishOutcome::Stored);
            if job.document_id.as_uuid().as_bytes()[0] % 2 == 0 {
                store
                    .delete_document(&SourceScope::All, s, job.document_id, chrono::Utc::now())
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
    });
    join_all(work).await;
    let changes = nodes[1].index_changes(0, 1_000).await.unwrap();
    if !nodes[1].is_shared() {
        assert!(changes.is_empty());
    } else {
        let positions: Vec<u64> = changes.iter().map(|c| c.position).collect();
        let expected: Vec<u64> = (1..=changes.len() as u64).collect();
        assert_eq!(positions, expected, "positions are consecutive");
        for id in &docs {
            let kinds: Vec<IndexChangeKind> = changes
                .iter()
                .filter(|c| c.document_id == *id)
                .map(|c| c.kind)
                .collect();
            let deleted = id.as_uuid().as_bytes()[0] % 2 == 0;
            let wanted = if deleted {
                vec![IndexChangeKind::Ready, IndexChangeKind::Removed]
            } else {
                vec![IndexChangeKind::Ready]
            };
            assert_eq!(kinds, wanted, "document {id}");
        }
    }
    for store in nodes {
        store.close().await;
    }
}

/// A node may join a cluster only with the model every live node searches with; a node not
/// seen for a while is gone, a keyword-only node conflicts with none, and a node that leaves
/// stops counting at once. A store one process owns has no other nodes to conflict with.
pub(super) async fn a_node_with_another_model_is_refused_while_one_runs(db: &TestDb) {
    let (first, second) = (db.open().await, db.open().await);
    let at = |s: i64| t0() + Duration::seconds(s);
    // Nodes seen in the last 30 s count as running.
    let join = |store: &std::sync::Arc<dyn Store>, node: &'static str, model, now: i64| {
        let store = std::sync::Arc::clone(store);
        async move {
            store
                .join_cluster(node, model, at(now), at(now - 30))
                .await
                .unwrap()
                .map(|n| n.node)
        }
    };
    assert_eq!(join(&first, "a", Some("minilm"), 0).await, None);
    if !first.is_shared() {
        assert_eq!(join(&second, "b", Some("other"), 1).await, None);
        first.close().await;
        second.close().await;
        return;
    }
    assert_eq!(join(&second, "b", Some("e5"), 5).await, Some("a".into()));
    assert_eq!(join(&second, "b", None, 5).await, None, "keyword only");
    assert_eq!(join(&second, "c", Some("minilm"), 5).await, None);
    // "a" keeps running, "c" stops being seen: "c" no longer holds anyone back, "a" does.
    first.node_seen("a", at(40)).await.unwrap();
    assert_eq!(join(&second, "d", Some("e5"), 50).await, Some("a".into()));
    // "a" stops cleanly; then the cluster may change its model.
    first.leave_cluster("a").await.unwrap();
    assert_eq!(join(&second, "d", Some("e5"), 50).await, None);
    // A node restarting with another model is refused by the others, never by itself.
    assert_eq!(join(&first, "d", Some("gte"), 51).await, None);
    assert_eq!(join(&first, "e", Some("e5"), 52).await, Some("d".into()));
    // Two nodes with different models joining at once: exactly one gets in.
    let (x, y) = tokio::join!(
        join(&first, "x", Some("model-x"), 100),
        join(&second, "y", Some("model-y"), 100)
    );
    assert!(x.is_some() != y.is_some(), "x: {x:?}, y: {y:?}");
    first.close().await;
    second.close().await;
}

/// The generation queue of a shared store is one line for every node: places in order of
/// arrival across nodes, the bounds counted cluster-wide, free slots handed to the head of the
/// line by whichever node looks, and the tickets of a node that stopped looking removed. A
/// store one process owns has no shared queue (each process queues its own questions).
pub(super) async fn the_shared_queue_is_one_fifo_line_for_every_node(db: &TestDb) {
    use uuid::Uuid;
    let (a, b) = (db.open().await, db.open().await);
    let limits = QueueLimits {
        slots: 1,
        max_waiting: 3,
        max_per_key: 2,
    };
    let at = |s: i64| t0() + Duration::seconds(s);
    let join = |store: &std::sync::Arc<dyn Store>, node: &'static str, key: KeyId, now: i64| {
        let store = std::sync::Arc::clone(store);
        async move {
            let id = Uuid::new_v4();
            let joined = store
                .queue_join(id, key, node, limits, at(now), at(now - 10))
                .await;
            (id, joined)
        }
    };
    if !a.is_shared() {
        assert!(join(&a, "na", KeyId::new(), 0).await.1.is_err());
        assert!(a.queue_view("na", 1, at(0), at(-10)).await.is_err());
        a.close().await;
        b.close().await;
        return;
    }
    let (k1, k2, k3) = (KeyId::new(), KeyId::new(), KeyId::new());
    let (t1, placed) = join(&a, "na", k1, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Running));
    let (t2, placed) = join(&b, "nb", k2, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Waiting(1)));
    let (t3, placed) = join(&a, "na", k3, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Waiting(2)));
    let (t4, placed) = join(&b, "nb", k1, 0).await;
    assert_eq!(placed.unwrap(), Ok(TicketPlace::Waiting(3)));
    // k1 holds its two places (one on each node); the line holds its three.
    let (_, placed) = join(&a, "na", k1, 0).await;
    assert_eq!(placed.unwrap(), Err(QueueRefusal::KeyShareUsed));
    let (_, placed) = join(&b, "nb", KeyId::new(), 0).await;
    assert_eq!(placed.unwrap(), Err(QueueRefusal::LineFull));

    let view = a.queue_view("na", 1, at(1), at(-9)).await.unwrap();
    assert_eq!(
        view.places,
        [(t1, TicketPlace::Running), (t3, TicketPlace::Waiting(2))]
    );
    assert_eq!((view.running, view.waiting), (1, 3));
    let view = b.queue_view("nb", 1, at(1), at(-9)).await.unwrap();
    assert_eq!(
        view.places,
        [(t2, TicketPlace::Waiting(1)), (t4, TicketPlace::Waiting(3))]
    );

    // The answer on node a ends: the slot goes to the head of the line, on node b.
    a.queue_leave(t1).await.unwrap();
    let view = b.queue_view("nb", 1, at(2), at(-8)).await.unwrap();
    assert_eq!(
        view.places,
        [(t2, TicketPlace::Running), (t4, TicketPlace::Waiting(2))]
    );
    let view = a.queue_view("na", 1, at(2), at(-8)).await.unwrap();
    assert_eq!(view.places, [(t3, TicketPlace::Waiting(1))]);

    // Node a stops looking (it died): after 10 s its question leaves the line.
    let view = b.queue_view("nb", 1, at(20), at(10)).await.unwrap();
    assert_eq!(
        view.places,
        [(t2, TicketPlace::Running), (t4, TicketPlace::Waiting(1))]
    );
    assert_eq!((view.running, view.waiting), (1, 1));
    a.close().await;
    b.close().await;
}
