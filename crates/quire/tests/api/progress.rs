//! `progress` of a document being processed in `GET …/documents/{id}`: present, with stage
//! and counts, only while it is processing.

use std::time::Duration;

use quire_core::{DocumentId, Permission};
use quire_store::{DocumentProgress, ProcessingStage};
use serde_json::{Value, json};

use crate::helpers::{TestServer, body};

#[tokio::test]
async fn a_processing_document_shows_its_stage_and_counts() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let doc = server
        .upload_ok(&key, &source, "big.md", b"# Big\n\nMany pages.\n")
        .await;
    let path = format!("/api/v1/sources/{source}/documents/{doc}");

    // Queued: no progress.
    let queued = body(server.get(&key, &path).await).await;
    assert_eq!(queued["status"], "queued");
    assert!(queued.get("progress").is_none(), "{queued}");

    // A worker (here the test, in its place) claims the job and reports embedding.
    let now = server.clock_now();
    server
        .store
        .claim_job("w", now, now + chrono::Duration::minutes(10))
        .await
        .unwrap()
        .unwrap();
    let id: DocumentId = doc.parse().unwrap();
    server
        .store
        .set_document_progress(
            id,
            &DocumentProgress {
                stage: ProcessingStage::Embedding,
                done: Some(120),
                total: Some(400),
                updated_at: now,
            },
        )
        .await
        .unwrap();
    let during = body(server.get(&key, &path).await).await;
    assert_eq!(during["status"], "processing");
    assert_eq!(
        during["progress"],
        json!({
            "stage": "embedding",
            "done": 120,
            "total": 400,
            "updatedAt": quire_core::wire_timestamp(now),
        })
    );
    // Lists stay as they were: progress is for the document's own page.
    let listed = body(
        server
            .get(&key, &format!("/api/v1/sources/{source}/documents"))
            .await,
    )
    .await;
    assert!(listed[0].get("progress").is_none(), "{listed}");

    // A stage that counts nothing has no counts.
    server
        .store
        .set_document_progress(
            id,
            &DocumentProgress {
                stage: ProcessingStage::Parsing,
                done: None,
                total: None,
                updated_at: now,
            },
        )
        .await
        .unwrap();
    let parsing = body(server.get(&key, &path).await).await;
    assert_eq!(parsing["progress"]["stage"], "parsing");
    assert!(parsing["progress"].get("done").is_none(), "{parsing}");
    server.stop().await;
}

#[tokio::test]
async fn progress_seen_while_a_real_worker_runs_is_consistent_and_gone_when_ready() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let text: String = (0..400)
        .map(|i| format!("## Part {i}\n\nThe pump needs priming before start number {i}.\n\n"))
        .collect();
    let doc = server
        .upload_ok(&key, &source, "long.md", text.as_bytes())
        .await;
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let ready = loop {
        let current: Value = body(server.get(&key, &path).await).await;
        match current["status"].as_str() {
            Some("ready") => break current,
            Some("processing") => {
                if let Some(progress) = current.get("progress") {
                    let stage = progress["stage"].as_str().unwrap();
                    assert!(
                        ["parsing", "screening", "embedding", "indexing"].contains(&stage),
                        "{progress}"
                    );
                    if let (Some(done), Some(total)) =
                        (progress["done"].as_u64(), progress["total"].as_u64())
                    {
                        assert!(done <= total, "{progress}");
                    }
                }
            }
            Some("queued") => assert!(current.get("progress").is_none(), "{current}"),
            other => panic!("unexpected status {other:?}: {current}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {current}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(ready.get("progress").is_none(), "{ready}");
    server.stop().await;
}

/// A scanned PDF is slow to parse (OCR takes about a second a page), so its pages show as the
/// parsing stage's progress while the worker reads them (written within a second of each page).
#[tokio::test]
async fn a_scan_being_read_shows_its_pages_parsed_of_all() {
    use quire_parse::fixtures::{PdfPage, scanned_pdf};
    let server = TestServer::start_with(crate::helpers::ocr_config).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Scans").await;
    let scan = scanned_pdf(&[
        PdfPage::Scan("The first page of the inspection report."),
        PdfPage::Scan("The second page lists the corroded vanes."),
        PdfPage::Scan("The third page is signed by the inspector."),
    ]);
    let doc = server.upload_ok(&key, &source, "scan.pdf", &scan).await;
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut pages_seen = Vec::new();
    loop {
        let current: Value = body(server.get(&key, &path).await).await;
        if current["status"] == "ready" {
            break;
        }
        assert_ne!(current["status"], "failed", "{current}");
        if let Some(progress) = current.get("progress")
            && progress["stage"] == "parsing"
            && let (Some(done), Some(total)) =
                (progress["done"].as_u64(), progress["total"].as_u64())
        {
            pages_seen.push((done, total));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {current}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!pages_seen.is_empty(), "no page progress was seen");
    assert!(
        pages_seen
            .iter()
            .all(|&(done, total)| total == 3 && (1..=3).contains(&done)),
        "{pages_seen:?}"
    );
    assert!(
        pages_seen.windows(2).all(|pair| pair[0].0 <= pair[1].0),
        "pages only go forward: {pages_seen:?}"
    );
    server.stop().await;
}
