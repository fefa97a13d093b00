//! Uploads, processing, deletion and durability of the job queue.

use chrono::Duration;
use quire_core::{DocumentId, NewDocument, Permission};
use reqwest::StatusCode;
use reqwest::multipart::{Form, Part};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::helpers::{TestServer, assert_error, body};

const GUIDE: &[u8] = b"# Pump guide\n\nPrime the centrifugal pump before starting it.\n\n## Safety\n\nWear gloves when touching the impeller.\n\x0c## Maintenance\n\nReplace the mechanical seal every two years.\n";

#[tokio::test]
async fn upload_becomes_ready_searchable_and_deletable() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Manuals").await;

    let response = server.upload(&key, &source, "guide.md", GUIDE).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let accepted = body(response).await;
    assert_eq!(accepted["status"], "queued");
    assert_eq!(accepted["name"], "guide.md");
    assert_eq!(accepted["dataSourceId"], source.as_str());
    let doc = accepted["id"].as_str().unwrap().to_owned();

    let ready = server.wait_for_status(&key, &source, &doc, "ready").await;
    assert_eq!(ready["pageCount"], 2);
    assert_eq!(ready["chunkCount"], 3);
    assert_eq!(ready["size"], GUIDE.len());
    assert_eq!(ready["contentType"], "text/markdown");
    assert_eq!(ready["sha256"], hex::encode(Sha256::digest(GUIDE)));
    assert_eq!(ready["error"], serde_json::Value::Null);
    for field in ["createdAt", "updatedAt"] {
        assert!(ready[field].as_str().unwrap().ends_with('Z'));
    }

    let found = body(
        server
            .search(&key, json!({"query": "mechanical seal"}))
            .await,
    )
    .await;
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{found}");
    let hit = &results[0];
    assert_eq!(
        hit["document"],
        json!({"id": doc, "name": "guide.md", "metadata": {}})
    );
    assert_eq!(hit["dataSource"], json!({"id": source, "name": "Manuals"}));
    assert_eq!(
        hit["metadata"],
        json!({"section": "Pump guide > Maintenance", "page": 2})
    );
    assert!(hit["content"].as_str().unwrap().contains("mechanical seal"));
    assert!(hit["score"].as_f64().unwrap() > 0.0);

    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    let deleted = server.delete(&key, &path).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert!(deleted.bytes().await.unwrap().is_empty());
    let after = body(
        server
            .search(&key, json!({"query": "mechanical seal"}))
            .await,
    )
    .await;
    assert_eq!(after["results"], json!([]));
    assert_error(
        server.get(&key, &path).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_error(
        server.delete(&key, &path).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_eq!(server.stored_files(), (0, 0), "the original is removed");
}

#[tokio::test]
async fn uploads_over_the_limit_are_413_and_leave_nothing() {
    let server = TestServer::start_with(|c| c.limits.max_upload_bytes = 1024).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Small").await;

    // Streamed past the limit while reading.
    let response = server.upload(&key, &source, "big.txt", &[b'a'; 2000]).await;
    let envelope = assert_error(response, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
    assert!(envelope["message"].as_str().unwrap().contains("1024"));
    // Refused from its declared length before reading.
    let response = server
        .upload(&key, &source, "huge.txt", &vec![b'a'; 200 * 1024])
        .await;
    assert_error(response, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;

    assert_eq!(server.stored_files(), (0, 0));
    let documents = server.documents(&key, &source).await;
    assert_eq!(documents, json!([]));
    // Exactly at the limit is fine.
    server
        .upload_ok(&key, &source, "edge.txt", &[b'a'; 1024])
        .await;
}

#[tokio::test]
async fn malformed_uploads_are_400_or_415() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let url = server.url(&format!("/api/v1/sources/{source}/documents/upload"));
    let send = |form: Form| {
        server
            .client
            .post(&url)
            .bearer_auth(&key)
            .multipart(form)
            .send()
    };

    let no_file = send(Form::new().text("note", "hello")).await.unwrap();
    assert_error(no_file, StatusCode::BAD_REQUEST, "bad_request").await;
    let empty = send(Form::new().part("file", Part::bytes(Vec::new()).file_name("e.txt")))
        .await
        .unwrap();
    let envelope = assert_error(empty, StatusCode::BAD_REQUEST, "bad_request").await;
    assert!(envelope["message"].as_str().unwrap().contains("empty"));
    let two = send(
        Form::new()
            .part("file", Part::bytes(b"one".to_vec()).file_name("1.txt"))
            .part("file", Part::bytes(b"two".to_vec()).file_name("2.txt")),
    )
    .await
    .unwrap();
    assert_error(two, StatusCode::BAD_REQUEST, "bad_request").await;

    let not_multipart = server
        .client
        .post(&url)
        .bearer_auth(&key)
        .json(&json!({"file": "x"}))
        .send()
        .await
        .unwrap();
    assert_error(
        not_multipart,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let broken = server
        .client
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "multipart/form-data; boundary=XYZ")
        .body("--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nunterminated")
        .send()
        .await
        .unwrap();
    assert_error(broken, StatusCode::BAD_REQUEST, "bad_request").await;

    let missing_source = server
        .upload(&key, &uuid::Uuid::new_v4().to_string(), "a.txt", b"x")
        .await;
    assert_error(missing_source, StatusCode::NOT_FOUND, "not_found").await;

    assert_eq!(server.stored_files(), (0, 0));
    let documents = server.documents(&key, &source).await;
    assert_eq!(documents, json!([]));
}

#[tokio::test]
async fn bulk_upload_reports_each_part_in_order() {
    let server = TestServer::start_with(|c| c.limits.max_upload_bytes = 4096).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Bulk").await;
    let form = Form::new()
        .part(
            "file",
            Part::bytes(b"# Good\n\nbulk alpha".to_vec()).file_name("good.md"),
        )
        .part("file", Part::bytes(Vec::new()).file_name("empty.txt"))
        .text("comment", "ignored")
        .part(
            "file",
            Part::bytes(b"%PDF-1.7 fake".to_vec()).file_name("paper.pdf"),
        )
        .part("file", Part::bytes(vec![b'z'; 5000]).file_name("big.txt"))
        .part(
            "file",
            Part::bytes(b"bulk beta in plain text".to_vec()).file_name("notes.txt"),
        );
    let response = server.upload_bulk(&key, &source, form).await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let report = body(response).await;
    assert_eq!(report["accepted"], 3);
    assert_eq!(report["rejected"], 2);
    let results = report["results"].as_array().unwrap();
    let summary: Vec<(u64, &str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["name"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, "good.md", "accepted"),
            (1, "empty.txt", "rejected"),
            (2, "paper.pdf", "accepted"),
            (3, "big.txt", "rejected"),
            (4, "notes.txt", "accepted"),
        ]
    );
    assert_eq!(results[1]["error"]["error"], "bad_request");
    assert_eq!(results[3]["error"]["error"], "payload_too_large");

    let id = |i: usize| results[i]["document"]["id"].as_str().unwrap().to_owned();
    server.wait_for_status(&key, &source, &id(0), "ready").await;
    server.wait_for_status(&key, &source, &id(4), "ready").await;
    let failed = server
        .wait_for_status(&key, &source, &id(2), "failed")
        .await;
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.starts_with("the PDF document is damaged or truncated"),
        "{error}"
    );
    assert_eq!(failed["chunkCount"], 0);

    let documents = server.documents(&key, &source).await;
    assert_eq!(documents.as_array().unwrap().len(), 3);
    assert_eq!(server.stored_files(), (0, 3));
}

#[tokio::test]
async fn bulk_upload_without_files_or_with_too_many_is_400() {
    let server = TestServer::start_with(|c| c.limits.max_bulk_files = 2).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Bulk").await;
    let url = server.url(&format!("/api/v1/sources/{source}/documents/upload-bulk"));
    let none = server
        .client
        .post(&url)
        .bearer_auth(&key)
        .multipart(Form::new().text("a", "b"))
        .send()
        .await
        .unwrap();
    assert_error(none, StatusCode::BAD_REQUEST, "bad_request").await;
    let mut form = Form::new();
    for i in 0..3 {
        form = form.part(
            "file",
            Part::bytes(format!("doc {i}").into_bytes()).file_name(format!("{i}.txt")),
        );
    }
    let many = server
        .client
        .post(&url)
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_error(many, StatusCode::BAD_REQUEST, "bad_request").await;
    assert_eq!(
        server.stored_files(),
        (0, 0),
        "nothing is kept from a refused request"
    );
}

#[tokio::test]
async fn legacy_encodings_are_read_and_broken_files_fail_with_a_reason() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let latin1 = server
        .upload_ok(
            &key,
            &source,
            "old.txt",
            b"Le caf\xE9 cr\xE8me du ch\xE2teau est servi.",
        )
        .await;
    let blank = server
        .upload_ok(&key, &source, "blank.md", b"\n\n   \n")
        .await;
    let docx = server
        .upload_ok(&key, &source, "report.docx", b"PK\x03\x04rest-of-zip")
        .await;
    let doc = server
        .upload_ok(
            &key,
            &source,
            "old.doc",
            b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1rest",
        )
        .await;
    server
        .wait_for_status(&key, &source, &latin1, "ready")
        .await;
    let found = body(server.search(&key, json!({"query": "château"})).await).await;
    assert!(
        found["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("café crème"),
        "{found}"
    );
    let failed = server
        .wait_for_status(&key, &source, &blank, "failed")
        .await;
    assert!(
        failed["error"].as_str().unwrap().contains("no text"),
        "{failed}"
    );
    let failed = server.wait_for_status(&key, &source, &docx, "failed").await;
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("DOCX document is damaged or truncated"),
        "{error}"
    );
    assert_eq!(
        failed["contentType"],
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    );
    let failed = server.wait_for_status(&key, &source, &doc, "failed").await;
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("Word 97-2003 document (.doc) is damaged or truncated"),
        "{failed}"
    );
}

/// A worker that died mid-job (its lease still held) does not leave the document processing:
/// the next start puts the job back in the queue.
#[tokio::test]
async fn a_restart_in_the_middle_of_processing_still_ends_ready() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let doc = server.upload_ok(&key, &source, "guide.md", GUIDE).await;

    // A worker of this node claims the job and then the process dies before it finishes.
    let node = std::fs::read_to_string(server.data_dir.path().join("node-id")).unwrap();
    let now = server.clock_now();
    let claimed = server
        .store
        .claim_job(
            &format!("{node}:doomed-worker"),
            now,
            now + Duration::minutes(10),
        )
        .await
        .unwrap();
    assert_eq!(claimed.unwrap().document_id.to_string(), doc);
    let during = body(
        server
            .get(&key, &format!("/api/v1/sources/{source}/documents/{doc}"))
            .await,
    )
    .await;
    assert_eq!(during["status"], "processing");

    let (dir, clock) = server.stop().await;
    let restarted = TestServer::start_in(dir, clock, |_| {}).await;
    let ready = restarted
        .wait_for_status(&key, &source, &doc, "ready")
        .await;
    assert_eq!(ready["chunkCount"], 3);
    let found = body(restarted.search(&key, json!({"query": "impeller"})).await).await;
    assert_eq!(found["results"].as_array().unwrap().len(), 1);
}

/// A job whose worker hung (its lease ran out) is taken over without a restart.
#[tokio::test]
async fn an_expired_lease_is_taken_over_without_a_restart() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;

    // A document whose job becomes runnable only in an hour, so the running workers cannot
    // take it before the hung worker below does.
    let later = server.clock_now() + Duration::hours(1);
    let doc = DocumentId::new();
    std::fs::write(
        server.data_dir.path().join("files").join(doc.to_string()),
        GUIDE,
    )
    .unwrap();
    server
        .store
        .create_document(NewDocument {
            id: doc,
            source_id: source.parse().unwrap(),
            name: "guide.md".into(),
            content_type: "text/markdown".into(),
            size: GUIDE.len() as u64,
            sha256: hex::encode(Sha256::digest(GUIDE)),
            metadata: Default::default(),
            external_id: None,
            created_at: later,
        })
        .await
        .unwrap();
    let job = server
        .store
        .claim_job("hung-worker", later, later + Duration::minutes(10))
        .await
        .unwrap();
    assert_eq!(job.unwrap().document_id, doc);

    server.clock.set(later + Duration::minutes(5));
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    assert_eq!(
        body(server.get(&key, &path).await).await["status"],
        "processing"
    );

    server.clock.set(later + Duration::minutes(11));
    let ready = server
        .wait_for_status(&key, &source, &doc.to_string(), "ready")
        .await;
    assert_eq!(ready["chunkCount"], 3);
}

#[tokio::test]
async fn documents_of_a_failed_upload_are_not_searchable() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let doc = server
        .upload_ok(&key, &source, "x.pdf", b"%PDF-1.4 searchable words")
        .await;
    server.wait_for_status(&key, &source, &doc, "failed").await;
    let found = body(
        server
            .search(&key, json!({"query": "searchable words"}))
            .await,
    )
    .await;
    assert_eq!(found["results"], json!([]));
}

/// The same bytes in the same source are one document; in another source they are another.
#[tokio::test]
async fn uploading_the_same_bytes_again_returns_the_existing_document() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let a = server.create_source(&key, "A").await;
    let b = server.create_source(&key, "B").await;
    let first = server.upload_ok(&key, &a, "guide.md", GUIDE).await;
    server.wait_for_status(&key, &a, &first, "ready").await;

    let again = server.upload(&key, &a, "renamed.md", GUIDE).await;
    assert_eq!(again.status(), StatusCode::OK);
    let existing = body(again).await;
    assert_eq!(existing["id"], first.as_str());
    assert_eq!(existing["name"], "guide.md");
    assert_eq!(existing["status"], "ready");
    assert_eq!(
        server.documents(&key, &a).await.as_array().unwrap().len(),
        1
    );
    assert_eq!(server.stored_files(), (0, 1), "the second copy is not kept");

    let form = Form::new()
        .part("file", Part::bytes(GUIDE.to_vec()).file_name("copy.md"))
        .part(
            "file",
            Part::bytes(b"fresh text".to_vec()).file_name("new.md"),
        );
    let report = body(server.upload_bulk(&key, &a, form).await).await;
    assert_eq!(
        (report["accepted"].as_u64(), report["duplicates"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(report["results"][0]["status"], "duplicate");
    assert_eq!(report["results"][0]["document"]["id"], first.as_str());

    let other = server.upload(&key, &b, "guide.md", GUIDE).await;
    assert_eq!(other.status(), StatusCode::ACCEPTED);
    assert_ne!(body(other).await["id"], first.as_str());

    // A failed document does not block a new attempt with the same bytes.
    let pdf = server
        .upload_ok(&key, &a, "x.pdf", b"%PDF-1.4 not really")
        .await;
    server.wait_for_status(&key, &a, &pdf, "failed").await;
    let retry = server
        .upload(&key, &a, "x.pdf", b"%PDF-1.4 not really")
        .await;
    assert_eq!(retry.status(), StatusCode::ACCEPTED);
}

/// Staging space is bounded over all requests: a bulk upload that would stage more than
/// `limits.max_staging_bytes` gets 507 for the parts beyond it, the budget comes back once the
/// uploads are stored, and a disk that would keep less than `limits.min_free_disk_bytes` refuses
/// uploads with 507 while search goes on.
#[tokio::test]
async fn staging_is_bounded_in_total_and_by_the_disks_free_space() {
    let server = TestServer::start_with(|c| {
        c.limits.max_upload_bytes = 4_000;
        c.limits.max_staging_bytes = 6_000;
    })
    .await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Docs").await;
    let text = |word: &str| format!("{word} ").repeat(600).into_bytes();
    let form = Form::new()
        .part("file", Part::bytes(text("alpha")).file_name("a.txt"))
        .part("file", Part::bytes(text("bravo")).file_name("b.txt"));
    let report = body(server.upload_bulk(&key, &source, form).await).await;
    let statuses: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["accepted", "rejected"], "{report}");
    assert_eq!(
        report["results"][1]["error"]["error"], "insufficient_storage",
        "{report}"
    );
    // The first upload is stored: its staging bytes are free again.
    let again = server.upload(&key, &source, "b.txt", &text("bravo")).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);

    let full = TestServer::start_with(|c| c.limits.min_free_disk_bytes = u64::MAX).await;
    let key = full.key(Permission::ReadWrite).await;
    let source = full.create_source(&key, "Docs").await;
    let refused = full.upload(&key, &source, "a.txt", b"hello").await;
    assert!(refused.headers().contains_key("retry-after"));
    assert_error(
        refused,
        StatusCode::INSUFFICIENT_STORAGE,
        "insufficient_storage",
    )
    .await;
    let search = full
        .post_json(&key, "/api/v1/search", &json!({"query": "hello"}))
        .await;
    assert_eq!(search.status(), StatusCode::OK);
}
