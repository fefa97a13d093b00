//! Keeping a claimed job's lease while its worker works on it, from the claim to the
//! transaction that makes the document ready, so no other worker takes the job over and
//! processes the document a second time.

use std::future::Future;
use std::sync::Arc;

use quire_core::Clock;
use quire_store::{ClaimedJob, Store, StoreResult};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Shortest time between two renewals of a job's lease, whatever the lease.
const MIN_RENEWAL: std::time::Duration = std::time::Duration::from_millis(10);

/// A claimed job's lease: how long it lasts and where it is renewed.
#[derive(Clone)]
pub(crate) struct Lease {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) job: ClaimedJob,
    pub(crate) duration: chrono::Duration,
}

impl Lease {
    /// Runs `work` while renewing the lease every third of its duration. `None` when a renewal
    /// found the lease lost: `work` is then dropped, and the job's new owner does it.
    ///
    /// The renewals run in a task of their own rather than beside `work` in this one, so a step
    /// of `work` that holds its thread for a while (screening or indexing a document of many
    /// thousand chunks) does not hold them back past the lease's end.
    pub(crate) async fn keep_during<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let (lost, lease_lost) = oneshot::channel();
        let _renewals = AbortOnDrop(tokio::spawn(self.clone().renew(lost)));
        tokio::select! {
            result = work => Some(result),
            // An error means the renewals stopped without losing the lease: only `work` ends this.
            Ok(()) = lease_lost => {
                tracing::warn!("lost the job's lease; stopping work on it");
                None
            }
        }
    }

    /// Renews the lease every third of its duration until a renewal finds it lost, which it
    /// reports on `lost`.
    async fn renew(self, lost: oneshot::Sender<()>) {
        let every = (self.duration / 3)
            .to_std()
            .unwrap_or_default()
            .max(MIN_RENEWAL);
        renew_until_lost(every, || {
            let now = self.clock.now();
            self.store.renew_lease(&self.job, now, now + self.duration)
        })
        .await;
        let _ = lost.send(());
    }
}

/// Calls `renew` every `every` until it answers false (the lease is lost). A renewal that fails
/// is tried again after a tenth of that, so a passing database hiccup does not let the lease
/// run out; only a renewal that answers settles that the lease is lost.
async fn renew_until_lost<F, R>(every: std::time::Duration, mut renew: F)
where
    F: FnMut() -> R,
    R: Future<Output = StoreResult<bool>>,
{
    let retry = (every / 10).max(MIN_RENEWAL);
    let mut wait = every;
    loop {
        tokio::time::sleep(wait).await;
        wait = match renew().await {
            Ok(true) => every,
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not renew the job's lease; trying again");
                retry
            }
        };
    }
}

/// Stops the renewals when the work they keep leased ends, however it ends.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_store::{claimed_document_at, with_source};
    use quire_core::ManualClock;
    use std::time::Duration;

    /// A store in `dir` with one document, claimed as worker `w` at `clock`'s time for `lease`.
    async fn claimed(
        dir: &std::path::Path,
        clock: &ManualClock,
        lease: chrono::Duration,
    ) -> (Arc<dyn Store>, ClaimedJob) {
        let (store, source) = with_source(dir).await;
        let job = claimed_document_at(&*store, source, 1, clock.now(), lease).await;
        (store, job)
    }

    /// A step that holds its thread longer than the lease does not let the lease run out: the
    /// renewals go on in their own task.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_that_holds_its_thread_does_not_hold_back_the_renewals() {
        let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
        let dir = tempfile::tempdir().unwrap();
        let (store, job) = claimed(dir.path(), &clock, chrono::Duration::milliseconds(300)).await;
        let lease = Lease {
            store: Arc::clone(&store),
            clock: clock.clone(),
            job,
            duration: chrono::Duration::milliseconds(300),
        };
        let ticking = {
            let clock = Arc::clone(&clock);
            async move {
                // Each 50 ms of real time is 50 ms on the lease's clock.
                for _ in 0..20 {
                    std::thread::sleep(Duration::from_millis(50));
                    clock.advance(chrono::Duration::milliseconds(50));
                }
            }
        };
        assert_eq!(lease.keep_during(ticking).await, Some(()));
        let now = clock.now();
        let other = store
            .claim_job("w2", now, now + chrono::Duration::minutes(1))
            .await
            .unwrap();
        assert!(other.is_none(), "the job was left to another worker");
    }

    /// Renewals that fail (the database did not answer) are tried again soon, and do not end
    /// the renewals: only an answer that the lease is lost does.
    #[tokio::test]
    async fn failed_renewals_are_retried_soon_and_do_not_lose_the_lease() {
        let every = Duration::from_millis(500);
        let started = tokio::time::Instant::now();
        let mut calls = Vec::new();
        renew_until_lost(every, || {
            calls.push(started.elapsed());
            let answer = match calls.len() {
                1..=3 => Err(quire_store::StoreError::Corrupt("connection reset".into())),
                4 => Ok(true),
                _ => Ok(false),
            };
            std::future::ready(answer)
        })
        .await;
        assert_eq!(calls.len(), 5, "{calls:?}");
        // The three retries came a tenth of the interval apart, well within one interval.
        assert!(calls[3] - calls[0] < every, "{calls:?}");
        assert!(calls[4] - calls[3] >= every, "{calls:?}");
    }

    /// When the job has been taken over, the work stops instead of finishing a second time.
    #[tokio::test]
    async fn work_stops_when_the_lease_is_lost() {
        let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
        let dir = tempfile::tempdir().unwrap();
        let (store, job) = claimed(dir.path(), &clock, chrono::Duration::milliseconds(30)).await;
        clock.advance(chrono::Duration::seconds(1));
        let now = clock.now();
        let taken = store
            .claim_job("w2", now, now + chrono::Duration::minutes(1))
            .await
            .unwrap();
        assert!(taken.is_some());
        let lease = Lease {
            store,
            clock,
            job,
            duration: chrono::Duration::milliseconds(30),
        };
        let never = std::future::pending::<()>();
        let outcome = tokio::time::timeout(Duration::from_secs(10), lease.keep_during(never))
            .await
            .expect("the lost lease did not stop the work");
        assert_eq!(outcome, None);
    }
}
