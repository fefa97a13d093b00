//! API keys: stored by the hash of their secret, and revoked.

use chrono::Duration;
use quire_core::{KeyId, NewApiKey, Permission, SourceId, SourceScope};
use quire_store::{Store, StoreError};

use crate::fixtures::{source, t0};

pub(super) async fn keys_are_stored_by_hash_and_revoked(store: &dyn Store) {
    let s = source(store, "S").await;
    let new = |hash: &str, scope: SourceScope| NewApiKey {
        id: KeyId::new(),
        name: "k".into(),
        permission: Permission::ReadWrite,
        scope,
        rate_limit: Some(7),
        key_hash: hash.into(),
        created_at: t0(),
    };
    let scoped = store
        .create_key(new("h1", SourceScope::only([s])))
        .await
        .unwrap();
    let all = store.create_key(new("h2", SourceScope::All)).await.unwrap();
    let found = store.find_key_by_hash("h1").await.unwrap().unwrap();
    assert_eq!(found, scoped);
    assert_eq!(found.scope, SourceScope::only([s]));
    assert_eq!(
        store.find_key_by_hash("h2").await.unwrap().unwrap().scope,
        SourceScope::All
    );
    assert!(store.find_key_by_hash("nope").await.unwrap().is_none());

    let unknown = store
        .create_key(new("h3", SourceScope::only([SourceId::new()])))
        .await;
    assert!(matches!(unknown, Err(StoreError::Invalid(_))));
    assert!(
        store.find_key_by_hash("h3").await.unwrap().is_none(),
        "nothing half-created"
    );

    store.touch_key(all.id, t0()).await.unwrap();
    let revoked = store
        .revoke_key(all.id, t0() + Duration::hours(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(revoked.revoked_at, Some(t0() + Duration::hours(1)));
    assert_eq!(revoked.last_used_at, Some(t0()));
    let twice = store
        .revoke_key(all.id, t0() + Duration::hours(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        twice.revoked_at, revoked.revoked_at,
        "the first revocation time stays"
    );
    assert!(
        store
            .revoke_key(KeyId::new(), t0())
            .await
            .unwrap()
            .is_none()
    );
    let listed: Vec<_> = store
        .list_keys()
        .await
        .unwrap()
        .iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(listed, vec![scoped.id, all.id]);
}
