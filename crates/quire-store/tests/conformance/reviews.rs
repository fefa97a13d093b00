//! The personal-data review stories: holding a document, and a decision that replaces the
//! recorded findings (and a redacted name) in the same step that queues the document again.

use chrono::Duration;
use quire_core::{DocumentId, DocumentStatus};
use quire_store::{DecidedReview, FinishOutcome, HeldDocument, ReviewDecision, Store};

use crate::fixtures::{document, source, t0};

const RAW: &str = r#"[{"type":"credit_card","in":"name","page":null,"text":"4111 1111 1111 1111","confidence":0.95,"context":"card 4111 1111 1111 1111"}]"#;
const REDUCED: &str =
    r#"[{"type":"credit_card","count":1,"in":["name"],"excerpt":"4*** **** **** **11"}]"#;

/// Claims the queued job of `doc` and holds it with the raw findings, showing `shown_name`
/// meanwhile when given.
async fn hold(store: &dyn Store, doc: DocumentId, shown_name: Option<&str>) {
    let job = store
        .claim_job("w", t0(), t0() + Duration::minutes(5))
        .await
        .unwrap()
        .expect("a queued job");
    assert_eq!(job.document_id, doc);
    let held = HeldDocument {
        pii_types: vec!["credit_card".into()],
        findings: RAW.into(),
        page_count: 1,
        shown_name: shown_name.map(str::to_owned),
    };
    assert_eq!(
        store.hold_document(&job, held, t0()).await.unwrap(),
        FinishOutcome::Stored
    );
}

pub(super) async fn a_decision_replaces_the_findings_and_the_name(store: &dyn Store) {
    let s = source(store, "Payments").await;
    let doc = document(store, s, "card 4111 1111 1111 1111.txt").await;
    hold(store, doc, Some("card [CREDIT_CARD].txt")).await;
    let waiting = store.get_review(doc).await.unwrap().unwrap();
    assert_eq!(waiting.findings, RAW);
    // While it waits, the document shows the masked name; the real one is kept for the review.
    assert_eq!(waiting.document.name, "card [CREDIT_CARD].txt");
    assert_eq!(
        waiting.held_name.as_deref(),
        Some("card 4111 1111 1111 1111.txt")
    );
    let listed = store.pending_reviews().await.unwrap();
    assert_eq!(listed[0].document.name, "card [CREDIT_CARD].txt");
    assert_eq!(waiting.document.status, DocumentStatus::PendingReview);
    assert_eq!(waiting.finding_count(), 1);

    let decided = DecidedReview {
        decision: ReviewDecision::Redact,
        findings: REDUCED.into(),
        name: Some("card [CREDIT_CARD].txt".into()),
    };
    let at = t0() + Duration::seconds(1);
    assert!(store.decide_review(doc, decided.clone(), at).await.unwrap());
    let review = store.get_review(doc).await.unwrap().unwrap();
    assert_eq!(review.findings, REDUCED, "the raw findings are gone");
    assert_eq!(review.finding_count(), 1);
    assert_eq!(review.decision, Some(ReviewDecision::Redact));
    assert_eq!(review.decided_at, Some(at));
    assert_eq!(review.document.name, "card [CREDIT_CARD].txt");
    assert_eq!(
        review.held_name, None,
        "the real name goes with the decision"
    );
    assert_eq!(review.document.status, DocumentStatus::Queued);
    assert!(store.pending_reviews().await.unwrap().is_empty());
    assert_eq!(
        store.review_decision(doc).await.unwrap(),
        Some(ReviewDecision::Redact)
    );
    let job = store
        .claim_job("w", at, at + Duration::minutes(5))
        .await
        .unwrap()
        .expect("the document is queued again");
    assert_eq!(job.document_name, "card [CREDIT_CARD].txt");

    // A second decision changes nothing, not even what it would have stored.
    let again = DecidedReview {
        decision: ReviewDecision::Approve,
        findings: "[]".into(),
        name: Some("other.txt".into()),
    };
    assert!(!store.decide_review(doc, again, at).await.unwrap());
    let unchanged = store.get_review(doc).await.unwrap().unwrap();
    assert_eq!(
        (
            unchanged.findings.as_str(),
            unchanged.document.name.as_str()
        ),
        (REDUCED, "card [CREDIT_CARD].txt")
    );

    // Approving without a new name keeps the uploaded one.
    let kept = document(store, s, "approved.txt").await;
    hold(store, kept, None).await;
    assert_eq!(
        store.get_review(kept).await.unwrap().unwrap().held_name,
        None
    );
    let approve = DecidedReview {
        decision: ReviewDecision::Approve,
        findings: REDUCED.into(),
        name: None,
    };
    assert!(store.decide_review(kept, approve, at).await.unwrap());
    let review = store.get_review(kept).await.unwrap().unwrap();
    assert_eq!(
        (review.findings.as_str(), review.document.name.as_str()),
        (REDUCED, "approved.txt")
    );
    // A document that was never held has nothing to decide.
    let never = document(store, s, "never.txt").await;
    let refused = DecidedReview {
        decision: ReviewDecision::Redact,
        findings: REDUCED.into(),
        name: Some("x.txt".into()),
    };
    assert!(!store.decide_review(never, refused, at).await.unwrap());
    assert!(store.get_review(never).await.unwrap().is_none());
}

/// An approval gives a document held under a masked name its real name back, and reviews
/// decided before findings were reduced are reduced at start, once.
pub(super) async fn approval_restores_the_name_and_old_findings_are_reduced(store: &dyn Store) {
    let s = source(store, "Payments").await;
    let real = "card 4111 1111 1111 1111.txt";
    let doc = document(store, s, real).await;
    hold(store, doc, Some("card [CREDIT_CARD].txt")).await;
    let waiting = store.get_review(doc).await.unwrap().unwrap();
    // What an earlier version stored: a decision that kept the raw findings.
    let approve = DecidedReview {
        decision: ReviewDecision::Approve,
        findings: RAW.into(),
        name: waiting.held_name.clone(),
    };
    let at = t0() + Duration::seconds(1);
    assert!(store.decide_review(doc, approve, at).await.unwrap());
    let review = store.get_review(doc).await.unwrap().unwrap();
    assert_eq!(review.document.name, real);
    assert_eq!(review.held_name, None);

    // A waiting review is left alone; a decided one is reduced, and only once.
    let still_waiting = document(store, s, "waiting.txt").await;
    hold(store, still_waiting, None).await;
    fn reduce(findings: &str) -> String {
        if findings == RAW {
            REDUCED.into()
        } else {
            findings.into()
        }
    }
    assert_eq!(store.reduce_decided_findings(reduce).await.unwrap(), 1);
    assert_eq!(
        store.get_review(doc).await.unwrap().unwrap().findings,
        REDUCED
    );
    assert_eq!(
        store
            .get_review(still_waiting)
            .await
            .unwrap()
            .unwrap()
            .findings,
        RAW
    );
    assert_eq!(store.reduce_decided_findings(reduce).await.unwrap(), 0);
}
