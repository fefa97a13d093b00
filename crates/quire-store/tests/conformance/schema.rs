//! Opening a database: the first handles opened at once agree on the schema, and reopening
//! keeps the data and skips the migrations already applied.

use quire_core::SourceScope;

use crate::fixtures::source;
use crate::harness::TestDb;

pub(super) async fn first_opens_at_once_agree_on_the_schema(db: &TestDb) {
    // Several nodes (or the server and the CLI) starting together on an empty database: the
    // migrations run once and every handle works.
    let (a, b, c) = tokio::join!(db.open(), db.open(), db.open());
    let s = source(&*a, "Shared").await;
    for store in [&b, &c] {
        let listed = store.list_sources(&SourceScope::All).await.unwrap();
        assert_eq!(listed.iter().map(|s| s.id).collect::<Vec<_>>(), [s]);
    }
    for store in [a, b, c] {
        store.close().await;
    }
}

pub(super) async fn reopening_keeps_data_and_skips_applied_migrations(db: &TestDb) {
    let store = db.open().await;
    let s = source(&*store, "Kept").await;
    store.close().await;
    let (a, b) = tokio::join!(db.open(), db.open());
    assert_eq!(
        a.get_source(&SourceScope::All, s)
            .await
            .unwrap()
            .unwrap()
            .name,
        "Kept"
    );
    assert_eq!(b.list_sources(&SourceScope::All).await.unwrap().len(), 1);
    a.close().await;
    b.close().await;
}
