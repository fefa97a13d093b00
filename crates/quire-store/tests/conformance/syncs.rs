//! Sources that sync: one run at a time per source, across handles; runs listed newest first;
//! due sources found; interrupted runs ended; item fingerprints kept and forgotten.

use std::sync::Arc;

use chrono::Duration;
use futures_util::future::join_all;
use quire_core::{
    NewSource, SourceDescription, SourceId, SourceName, SourceScope, SourceType, WebhookEvent,
    WebhookId,
};
use quire_store::{NewSync, NewWebhook, Store, SyncCounts};

use crate::fixtures::t0;
use crate::harness::TestDb;

/// When runs started at [`t0`] are leased until.
fn lease_end() -> chrono::DateTime<chrono::Utc> {
    t0() + Duration::seconds(30)
}

async fn syncing_source(
    store: &dyn Store,
    next: Option<chrono::DateTime<chrono::Utc>>,
) -> SourceId {
    store
        .create_syncing_source(
            NewSource {
                id: SourceId::new(),
                name: SourceName::parse("Handbook").unwrap(),
                description: SourceDescription::default(),
                source_type: SourceType::Folder,
                created_at: t0(),
            },
            NewSync {
                kind: "folder".into(),
                config: r#"{"path": "/srv/handbook"}"#.into(),
                sealed_secret: Some("v1:sealed".into()),
                interval_seconds: 60,
                next_run_at: next,
            },
        )
        .await
        .unwrap()
        .id
}

pub(super) async fn sync_runs_are_one_at_a_time_and_recorded(store: &dyn Store) {
    let due = syncing_source(store, Some(t0())).await;
    let later = syncing_source(store, Some(t0() + Duration::hours(1))).await;
    let stored = store.source_sync(due).await.unwrap().unwrap();
    assert_eq!(
        (
            stored.kind.as_str(),
            stored.sealed_secret.as_deref(),
            stored.interval_seconds
        ),
        ("folder", Some("v1:sealed"), 60)
    );
    assert_eq!(store.due_syncs(t0()).await.unwrap(), [due]);

    let mut run = store
        .start_sync_run(due, uuid::Uuid::new_v4(), "node-a", t0(), lease_end())
        .await
        .unwrap()
        .expect("started");
    assert!(
        store
            .start_sync_run(due, uuid::Uuid::new_v4(), "node-b", t0(), lease_end())
            .await
            .unwrap()
            .is_none(),
        "one run at a time"
    );
    assert!(
        store.due_syncs(t0()).await.unwrap().is_empty(),
        "running is not due"
    );
    run.status = "succeeded".into();
    run.counts = SyncCounts {
        added: 2,
        updated: 1,
        deleted: 1,
        unchanged: 5,
        failed: 1,
    };
    run.failures = r#"[{"externalId":"a.pdf","reason":"broken"}]"#.into();
    run.finished_at = Some(t0() + Duration::seconds(3));
    assert!(
        store
            .finish_sync_run(&run, Some(t0() + Duration::minutes(1)))
            .await
            .unwrap()
    );
    let runs = store.sync_runs(due, 10).await.unwrap();
    assert_eq!(runs, [run.clone()]);
    assert_eq!(
        store.source_sync(due).await.unwrap().unwrap().next_run_at,
        Some(t0() + Duration::minutes(1))
    );
    assert_eq!(
        store
            .due_syncs(t0() + Duration::hours(2))
            .await
            .unwrap()
            .len(),
        2
    );

    // A run left running by a node that stopped ends as failed at its restart.
    let left = store
        .start_sync_run(later, uuid::Uuid::new_v4(), "node-b", t0(), lease_end())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .fail_interrupted_sync_runs(Some("node-a"), t0())
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .fail_interrupted_sync_runs(Some("node-b"), t0())
            .await
            .unwrap(),
        1
    );
    let ended = &store.sync_runs(later, 1).await.unwrap()[0];
    assert_eq!((ended.id, ended.status.as_str()), (left.id, "failed"));
    assert!(ended.error.as_deref().unwrap().contains("interrupted"));

    // Fingerprints: kept, replaced, forgotten.
    store
        .set_sync_item(due, "b.md", Some("size:1"))
        .await
        .unwrap();
    store
        .set_sync_item(due, "a.md", Some("size:2"))
        .await
        .unwrap();
    store
        .set_sync_item(due, "a.md", Some("size:3"))
        .await
        .unwrap();
    assert_eq!(
        store.sync_items(due).await.unwrap(),
        [
            ("a.md".to_owned(), "size:3".to_owned()),
            ("b.md".to_owned(), "size:1".to_owned())
        ]
    );
    store.set_sync_item(due, "b.md", None).await.unwrap();
    assert_eq!(store.sync_items(due).await.unwrap().len(), 1);
    assert!(store.sync_items(later).await.unwrap().is_empty());
}

/// Runs started at once from several handles (processes, nodes): exactly one starts.
pub(super) async fn only_one_of_concurrent_sync_starts_wins(db: &TestDb) {
    let first = db.open().await;
    let source = syncing_source(&*first, None).await;
    let handles: Vec<Arc<dyn Store>> = join_all((0..4).map(|_| db.open())).await;
    let started = join_all(handles.iter().enumerate().map(|(n, store)| {
        let store = Arc::clone(store);
        async move {
            store
                .start_sync_run(
                    source,
                    uuid::Uuid::new_v4(),
                    &format!("node-{n}"),
                    t0(),
                    lease_end(),
                )
                .await
                .unwrap()
        }
    }))
    .await;
    assert_eq!(
        started.iter().filter(|s| s.is_some()).count(),
        1,
        "{started:?}"
    );
    for store in handles {
        store.close().await;
    }
    first.close().await;
}

/// A run whose node stops renewing its lease is ended as interrupted once, announced, and the
/// late node can neither renew it nor record its own end over it.
pub(super) async fn a_run_whose_lease_runs_out_is_ended_once_and_announced(store: &dyn Store) {
    store
        .create_webhook(NewWebhook {
            id: WebhookId::new(),
            url: "https://hooks.example/synced".into(),
            events: vec![WebhookEvent::SourceSynced],
            secret: "whsec-synced".into(),
            scope: SourceScope::All,
            created_at: t0(),
        })
        .await
        .unwrap();
    let source = syncing_source(store, None).await;
    let mut run = store
        .start_sync_run(source, uuid::Uuid::new_v4(), "node-a", t0(), lease_end())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.fail_expired_sync_runs(lease_end()).await.unwrap(), 0);
    // Renewed before it ran out: still running past the first end.
    let renewed_until = lease_end() + Duration::seconds(30);
    assert!(store.renew_sync_run(run.id, renewed_until).await.unwrap());
    assert_eq!(
        store
            .fail_expired_sync_runs(lease_end() + Duration::seconds(1))
            .await
            .unwrap(),
        0
    );
    assert!(store.due_syncs(renewed_until).await.unwrap().is_empty());

    let late = renewed_until + Duration::seconds(1);
    assert_eq!(store.fail_expired_sync_runs(late).await.unwrap(), 1);
    assert_eq!(store.fail_expired_sync_runs(late).await.unwrap(), 0);
    let ended = &store.sync_runs(source, 1).await.unwrap()[0];
    assert_eq!(
        (ended.id, ended.status.as_str(), ended.finished_at),
        (run.id, "failed", Some(late))
    );
    assert!(
        ended.error.as_deref().unwrap().contains("lease"),
        "{ended:?}"
    );
    let announced = store
        .claim_deliveries("d", late, late + Duration::minutes(1), 10)
        .await
        .unwrap();
    assert_eq!(announced.len(), 1, "{announced:?}");
    let body: serde_json::Value = serde_json::from_str(&announced[0].body).unwrap();
    assert_eq!(body["event"], "source.synced", "{body}");
    assert_eq!(body["data"]["run"]["status"], "failed", "{body}");
    assert_eq!(body["data"]["run"]["id"], run.id.to_string(), "{body}");

    // The stalled node comes back: its lease is gone and its end is not recorded.
    assert!(
        !store
            .renew_sync_run(run.id, late + Duration::seconds(30))
            .await
            .unwrap()
    );
    run.status = "succeeded".into();
    run.counts.added = 7;
    run.finished_at = Some(late + Duration::seconds(5));
    assert!(!store.finish_sync_run(&run, None).await.unwrap());
    let kept = &store.sync_runs(source, 1).await.unwrap()[0];
    assert_eq!((kept.status.as_str(), kept.counts.added), ("failed", 0));
    assert!(
        store
            // Within the first claim's minute: only a new event could be claimed.
            .claim_deliveries(
                "e",
                late + Duration::seconds(30),
                late + Duration::minutes(1),
                10
            )
            .await
            .unwrap()
            .is_empty(),
        "announced once"
    );
}
