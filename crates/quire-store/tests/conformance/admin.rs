//! The admin interface's stories: one password, sessions found by token hash and ended by a
//! password change or pruning, the audit log newest first, and the dashboard's counts.

use chrono::Duration;
use quire_core::DocumentStatus;
use quire_store::{AuditEntry, Store};

use crate::fixtures::{document, source, t0};

pub async fn password_and_sessions(store: &dyn Store) {
    assert_eq!(store.admin_password_hash().await.unwrap(), None);
    store
        .set_admin_password_hash("$argon2id$one", t0())
        .await
        .unwrap();
    assert_eq!(
        store.admin_password_hash().await.unwrap().as_deref(),
        Some("$argon2id$one")
    );

    let later = t0() + Duration::hours(12);
    store
        .create_admin_session("h1", "csrf1", later)
        .await
        .unwrap();
    store
        .create_admin_session("h2", "csrf2", t0() + Duration::hours(1))
        .await
        .unwrap();
    let session = store.admin_session("h1").await.unwrap().unwrap();
    assert_eq!(
        (session.csrf.as_str(), session.expires_at),
        ("csrf1", later)
    );
    assert_eq!(store.admin_session("nope").await.unwrap(), None);

    // Pruning forgets only what has expired.
    assert_eq!(
        store
            .prune_admin_sessions(t0() + Duration::hours(1))
            .await
            .unwrap(),
        1
    );
    assert!(store.admin_session("h2").await.unwrap().is_none());
    assert!(store.delete_admin_session("h1").await.unwrap());
    assert!(!store.delete_admin_session("h1").await.unwrap());

    // A new password replaces the old and ends every session.
    store
        .create_admin_session("h3", "csrf3", later)
        .await
        .unwrap();
    store
        .set_admin_password_hash("$argon2id$two", t0())
        .await
        .unwrap();
    assert_eq!(
        store.admin_password_hash().await.unwrap().as_deref(),
        Some("$argon2id$two")
    );
    assert!(store.admin_session("h3").await.unwrap().is_none());
}

pub async fn audit_log_is_newest_first(store: &dyn Store) {
    assert!(store.audit_log(10).await.unwrap().is_empty());
    for (minutes, action) in [(0, "first"), (5, "second"), (5, "third")] {
        store
            .record_audit(AuditEntry {
                at: t0() + Duration::minutes(minutes),
                actor: format!("key {action}"),
                action: action.into(),
                detail: format!("{action} detail"),
            })
            .await
            .unwrap();
    }
    let actions: Vec<String> = store
        .audit_log(10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(actions, ["third", "second", "first"]);
    let newest = &store.audit_log(1).await.unwrap()[0];
    assert_eq!(newest.detail, "third detail");
    assert_eq!(newest.actor, "key third");
}

pub async fn dashboard_counts(store: &dyn Store) {
    assert!(store.document_status_counts().await.unwrap().is_empty());
    let src = source(store, "counted").await;
    document(store, src, "a.txt").await;
    document(store, src, "b.txt").await;
    assert_eq!(
        store.document_status_counts().await.unwrap(),
        [(DocumentStatus::Queued, 2)]
    );
    let job = store
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    store.fail_document(&job, "unreadable", t0()).await.unwrap();
    let failures = store.recent_failures(10).await.unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].error.as_deref(), Some("unreadable"));
    let mut counts = store.document_status_counts().await.unwrap();
    counts.sort_by_key(|(s, _)| s.as_str());
    assert_eq!(
        counts,
        [(DocumentStatus::Failed, 1), (DocumentStatus::Queued, 1)]
    );
}
