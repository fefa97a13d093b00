//! The job queue: leases renewed until lost, jobs finished (alone or together), resumed, claimed
//! once across handles, woken on, taken back by a restarted node, and documents deleted while
//! their workers finish.

use chrono::Duration;
use futures_util::future::join_all;
use quire_core::{DocumentId, DocumentStatus, SourceScope};
use quire_store::{FinishOutcome, Store};

use crate::fixtures::{chunks, document, source, t0};
use crate::harness::TestDb;

pub(super) async fn leases_are_renewed_until_lost(store: &dyn Store) {
    let s = source(store, "S").await;
    let first = document(store, s, "1.txt").await;
    let lease = Duration::minutes(10);
    let job = store
        .claim_job("w1", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();

    // Renewed before it runs out, the lease outlives its first end: nobody else claims it.
    let renewed_at = t0() + Duration::minutes(8);
    assert!(
        store
            .renew_lease(&job, renewed_at, renewed_at + lease)
            .await
            .unwrap()
    );
    let past_first_end = t0() + lease + Duration::seconds(1);
    assert!(
        store
            .claim_job("w2", past_first_end, past_first_end + lease)
            .await
            .unwrap()
            .is_none(),
        "a renewed lease is still held"
    );

    // Not renewed again, it runs out and another worker takes the job; the first worker's
    // renewal (a late one) is refused and so is its result.
    let expired = renewed_at + lease + Duration::seconds(1);
    let taken = store
        .claim_job("w2", expired, expired + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.document_id, taken.attempts), (first, 2));
    assert!(
        !store
            .renew_lease(&job, expired, expired + lease)
            .await
            .unwrap()
    );
    assert!(
        store
            .renew_lease(&taken, expired, expired + lease)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .finish_document(&job, chunks(1), expired)
            .await
            .unwrap(),
        FinishOutcome::LeaseLost
    );

    // A finished job has no lease to renew, and neither has a job gone with its document.
    assert_eq!(
        store
            .finish_document(&taken, chunks(1), expired)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    assert!(
        !store
            .renew_lease(&taken, expired, expired + lease)
            .await
            .unwrap()
    );
    let second = document(store, s, "2.txt").await;
    let job2 = store
        .claim_job("w1", expired, expired + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job2.document_id, second);
    store
        .delete_document(&SourceScope::All, s, second, chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert!(
        !store
            .renew_lease(&job2, expired, expired + lease)
            .await
            .unwrap()
    );
}

/// Documents finished together (a commit's worth): each is stored or not on its own terms, a
/// lost lease or a deleted document changing nothing, and each outcome comes back in order.
pub(super) async fn documents_finished_together_each_get_their_own_outcome(store: &dyn Store) {
    let s = source(store, "S").await;
    let mut jobs = Vec::new();
    for n in 0..4 {
        document(store, s, &format!("{n}.txt")).await;
        // The third's lease is short, so another worker can take it over.
        let lease = if n == 2 {
            Duration::seconds(1)
        } else {
            Duration::minutes(10)
        };
        let job = store
            .claim_job("w1", t0(), t0() + lease)
            .await
            .unwrap()
            .unwrap();
        jobs.push(job);
    }
    let later = t0() + Duration::seconds(5);
    let taken = store
        .claim_job("w2", later, later + Duration::minutes(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.document_id, jobs[2].document_id);
    store
        .delete_document(
            &SourceScope::All,
            s,
            jobs[1].document_id,
            chrono::Utc::now(),
        )
        .await
        .unwrap();

    let finished: Vec<_> = jobs
        .iter()
        .zip([2, 3, 4, 5])
        .map(|(job, n)| (job.clone(), chunks(n)))
        .collect();
    let outcomes = store.finish_documents(&finished, later).await.unwrap();
    assert_eq!(
        outcomes,
        vec![
            FinishOutcome::Stored,
            FinishOutcome::DocumentGone,
            FinishOutcome::LeaseLost,
            FinishOutcome::Stored,
        ]
    );
    for (job, (status, chunk_count)) in jobs.iter().zip([
        (Some(DocumentStatus::Ready), 2),
        (None, 0),
        (Some(DocumentStatus::Processing), 0),
        (Some(DocumentStatus::Ready), 5),
    ]) {
        let doc = store
            .get_document(&SourceScope::All, s, job.document_id)
            .await
            .unwrap();
        assert_eq!(doc.as_ref().map(|d| d.status), status);
        assert_eq!(
            store.document_chunks(job.document_id).await.unwrap().len(),
            chunk_count
        );
    }
    // The job taken over is the new worker's to finish.
    assert_eq!(
        store
            .finish_document(&taken, chunks(1), later)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    assert_eq!(store.finish_documents(&[], later).await.unwrap(), vec![]);
}

pub(super) async fn jobs_are_leased_finished_and_resumed(store: &dyn Store) {
    let s = source(store, "S").await;
    let first = document(store, s, "1.txt").await;
    let second = document(store, s, "2.txt").await;
    let lease = Duration::minutes(10);

    let job = store
        .claim_job("w1", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (job.document_id, job.attempts, job.source_id),
        (first, 1, s)
    );
    assert_eq!(job.document_name, "1.txt");
    let doc = store
        .get_document(&SourceScope::All, s, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(doc.status, DocumentStatus::Processing);

    let job2 = store
        .claim_job("w2", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job2.document_id, second);
    assert!(
        store
            .claim_job("w3", t0(), t0() + lease)
            .await
            .unwrap()
            .is_none(),
        "all leased"
    );

    // w1's lease runs out; w3 takes the job over and w1 can no longer finish it.
    let later = t0() + lease + Duration::seconds(1);
    let taken = store
        .claim_job("w3", later, later + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.document_id, taken.attempts), (first, 2));
    assert_eq!(
        store.finish_document(&job, chunks(2), later).await.unwrap(),
        FinishOutcome::LeaseLost
    );
    assert_eq!(
        store
            .finish_document(&taken, chunks(2), later)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    let ready = store
        .get_document(&SourceScope::All, s, first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (ready.status, ready.chunk_count, ready.page_count),
        (DocumentStatus::Ready, 2, 1)
    );
    assert_eq!(ready.updated_at, later);

    assert_eq!(
        store.fail_document(&job2, "bad file", later).await.unwrap(),
        FinishOutcome::Stored
    );
    let failed = store
        .get_document(&SourceScope::All, s, second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (failed.status, failed.error.as_deref()),
        (DocumentStatus::Failed, Some("bad file"))
    );
    assert_eq!(store.pending_job_count().await.unwrap(), 0);

    let hits = store
        .ready_documents(&SourceScope::All, &[first, second])
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "only ready documents are search hits");
    assert_eq!((hits[0].id, hits[0].source_name.as_str()), (first, "S"));
    assert!(
        store
            .ready_documents(&SourceScope::only([]), &[first])
            .await
            .unwrap()
            .is_empty()
    );

    // A job running when its owner died goes back to the queue at the next start.
    let third = document(store, s, "3.txt").await;
    let job3 = store
        .claim_job("dead", later, later + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.requeue_running_jobs(None, later).await.unwrap(), 1);
    let queued = store
        .get_document(&SourceScope::All, s, third)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(queued.status, DocumentStatus::Queued);
    let again = store
        .claim_job("w4", later, later + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.document_id, again.attempts), (third, 2));
    assert_eq!(
        store
            .finish_document(&job3, chunks(1), later)
            .await
            .unwrap(),
        FinishOutcome::LeaseLost
    );

    // A document deleted while processed is not resurrected.
    store
        .delete_document(&SourceScope::All, s, third, chrono::Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .finish_document(&again, chunks(1), later)
            .await
            .unwrap(),
        FinishOutcome::DocumentGone
    );
}

pub(super) async fn a_restarted_node_takes_back_only_its_own_jobs(store: &dyn Store) {
    let s = source(store, "S").await;
    let lease = Duration::minutes(5);
    let mine = document(store, s, "mine.txt").await;
    let theirs = document(store, s, "theirs.txt").await;
    let claimed_mine = store
        .claim_job("node-a:1111-0", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    let claimed_theirs = store
        .claim_job("node-b:2222-0", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed_mine.document_id, mine);
    assert_eq!(claimed_theirs.document_id, theirs);
    // Node A restarts: its old worker's job comes back, node B's (alive) keeps its lease.
    assert_eq!(
        store
            .requeue_running_jobs(Some("node-a:"), t0())
            .await
            .unwrap(),
        1
    );
    let status = |id| async move {
        store
            .get_document(&SourceScope::All, s, id)
            .await
            .unwrap()
            .unwrap()
            .status
    };
    assert_eq!(status(mine).await, DocumentStatus::Queued);
    assert_eq!(status(theirs).await, DocumentStatus::Processing);
    let again = store
        .claim_job("node-a:3333-0", t0(), t0() + lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.document_id, mine);
    assert!(
        store
            .claim_job("node-a:3333-1", t0(), t0() + lease)
            .await
            .unwrap()
            .is_none(),
        "node B's job was taken while its lease runs"
    );
}

pub(super) async fn jobs_are_claimed_once_across_handles(db: &TestDb) {
    let first = db.open().await;
    let second = db.open().await;
    let s = source(&*first, "S").await;
    let mut docs = Vec::new();
    for i in 0..12 {
        docs.push(document(&*first, s, &format!("{i}.txt")).await);
    }
    let drain = async |store: &dyn Store, worker: &str| {
        let mut claimed = Vec::new();
        while let Some(job) = store
            .claim_job(worker, t0(), t0() + Duration::minutes(5))
            .await
            .unwrap()
        {
            claimed.push(job.document_id);
        }
        claimed
    };
    let (a, b) = tokio::join!(drain(&*first, "a"), drain(&*second, "b"));
    let mut all: Vec<DocumentId> = a.iter().chain(&b).copied().collect();
    all.sort();
    docs.sort();
    assert_eq!(all, docs, "every job claimed exactly once");
    first.close().await;
    second.close().await;
}

pub(super) async fn a_queued_job_wakes_waiting_workers(db: &TestDb) {
    use std::time::{Duration, Instant};

    let worker = db.open().await;
    let api = db.open().await;
    let s = source(&*api, "S").await;

    // Nothing queued: the wait lasts its whole time.
    let idle = Duration::from_millis(300);
    let started = Instant::now();
    worker.wait_for_jobs(idle).await;
    assert!(started.elapsed() >= idle, "{:?}", started.elapsed());

    // A document uploaded through another handle (another node) while two workers wait.
    let max = if db.wakes_workers() {
        Duration::from_secs(60)
    } else {
        Duration::from_millis(500)
    };
    let started = Instant::now();
    let upload = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        document(&*api, s, "new.txt").await
    };
    let ((), (), doc) = tokio::join!(worker.wait_for_jobs(max), worker.wait_for_jobs(max), upload);
    let waited = started.elapsed();
    if db.wakes_workers() {
        assert!(
            waited < Duration::from_secs(10),
            "woken, not timed out: {waited:?}"
        );
    } else {
        assert!(
            waited >= max,
            "without notifications the wait is a sleep: {waited:?}"
        );
    }
    let job = worker
        .claim_job("w", t0(), t0() + chrono::Duration::minutes(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.document_id, doc);
    worker.close().await;
    api.close().await;
}

/// A document deleted (on one node) while its worker finishes or fails it (on another) is
/// deleted, and the worker learns it is gone: neither side gets an error. On PostgreSQL the two
/// lock the document's row and its job's row; taken in opposite orders they deadlocked, and
/// the server aborted one of them.
pub(super) async fn deleting_while_workers_finish_never_fails(db: &TestDb) {
    let api = db.open().await;
    let worker = db.open().await;
    let s = source(&*api, "S").await;
    let mut docs = Vec::new();
    for i in 0..24 {
        docs.push(document(&*api, s, &format!("{i}.txt")).await);
    }
    let mut jobs = Vec::new();
    while let Some(job) = worker
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
    {
        jobs.push(job);
    }
    assert_eq!(jobs.len(), docs.len());
    let races = jobs.iter().enumerate().map(|(i, job)| {
        let (api, worker) = (&api, &worker);
        async move {
            let end = async {
                if i % 2 == 0 {
                    worker.finish_document(job, chunks(200), t0()).await
                } else {
                    worker.fail_document(job, "unreadable", t0()).await
                }
            };
            let delete =
                api.delete_document(&SourceScope::All, s, job.document_id, chrono::Utc::now());
            let (ended, deleted) = tokio::join!(end, delete);
            let ended = ended.unwrap_or_else(|e| panic!("ending job {i}: {e}"));
            assert!(
                matches!(ended, FinishOutcome::Stored | FinishOutcome::DocumentGone),
                "job {i}: {ended:?}"
            );
            let deleted = deleted.unwrap_or_else(|e| panic!("deleting document {i}: {e}"));
            assert!(deleted.is_some(), "document {i} was not deleted");
        }
    });
    join_all(races).await;
    for id in docs {
        assert!(api.find_document(id).await.unwrap().is_none());
        assert!(api.document_chunks(id).await.unwrap().is_empty());
    }
    api.close().await;
    worker.close().await;
}
