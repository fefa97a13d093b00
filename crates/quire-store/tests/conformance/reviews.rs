//! The personal-data review stories: holding a document, and a decision that replaces the
//! recorded findings (and a redacted name) in the same step that queues the document again.

use chrono::Duration;
use quire_core::{DocumentId, DocumentStatus};
use quire_store::{DecidedReview, FinishOutcome, HeldDocument, ReviewDecision, Store};

use super::{document, source, t0};

const RAW: &str = r#"[{"type":"credit_card","in":"name","page":null,"text":"4111 1111 1111 1111","confidence":0.95,"context":"card 4111 1111 1111 1111"}]"#;
const REDUCED: &str =
    r#"[{"type":"credit_card","count":1,"in":["name"],"excerpt":"4*** **** **** **11"}]"#;

/// Claims the queued job of `doc` and holds it with the raw findings.
async fn hold(store: &dyn Store, doc: DocumentId) {
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
    };
    assert_eq!(
        store.hold_document(&job, held, t0()).await.unwrap(),
        FinishOutcome::Stored
    );
}

pub(super) async fn a_decision_replaces_the_findings_and_the_name(store: &dyn Store) {
    let s = source(store, "Payments").await;
    let doc = document(store, s, "card 4111 1111 1111 1111.txt").await;
    hold(store, doc).await;
    let waiting = store.get_review(doc).await.unwrap().unwrap();
    assert_eq!(waiting.findings, RAW);
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
    hold(store, kept).await;
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
