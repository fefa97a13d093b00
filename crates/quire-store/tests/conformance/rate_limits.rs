//! Rate windows: counted (exactly, under concurrent hits) and pruned.

use chrono::Duration;
use futures_util::future::join_all;
use quire_core::KeyId;
use quire_store::{RateBucket, RateWindow, Store};

use crate::fixtures::t0;

pub(super) async fn rate_windows_count_and_prune(store: &dyn Store) {
    let window = |bucket, start| RateWindow {
        key: KeyId(uuid::Uuid::nil()),
        bucket,
        start,
    };
    let w = window(RateBucket::Search, t0());
    assert_eq!(store.peek_rate_window(&w).await.unwrap(), 0);
    for expected in 1..=3 {
        assert_eq!(store.hit_rate_window(&w).await.unwrap(), expected);
    }
    assert_eq!(store.peek_rate_window(&w).await.unwrap(), 3);
    assert_eq!(
        store
            .peek_rate_window(&window(RateBucket::Generate, t0()))
            .await
            .unwrap(),
        0
    );
    let next = window(RateBucket::Search, t0() + Duration::minutes(1));
    assert_eq!(store.hit_rate_window(&next).await.unwrap(), 1);
    assert_eq!(
        store
            .prune_rate_windows(t0() + Duration::seconds(30))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.peek_rate_window(&w).await.unwrap(), 0);
    assert_eq!(store.peek_rate_window(&next).await.unwrap(), 1);
}

pub(super) async fn concurrent_rate_hits_are_counted_exactly(store: &dyn Store) {
    let window = RateWindow {
        key: KeyId::new(),
        bucket: RateBucket::Generate,
        start: t0(),
    };
    // All at once: on PostgreSQL they run on different connections, like hits on several nodes.
    let hits = join_all((0..40).map(|_| store.hit_rate_window(&window))).await;
    let mut counts: Vec<u64> = hits.into_iter().map(Result::unwrap).collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=40).collect::<Vec<u64>>(),
        "every hit its own count"
    );
    assert_eq!(store.peek_rate_window(&window).await.unwrap(), 40);
}
