//! PDFs through the upload API: pages and outline sections reach search results; encrypted,
//! scanned and truncated files fail with their reason while good ones beside them are ready.

use quire_core::Permission;
use quire_parse::fixtures::{encrypted_pdf, image_only_pdf, pdf};
use serde_json::json;

use crate::helpers::{TestServer, body};

#[tokio::test]
async fn pdf_pages_and_bookmarks_reach_search_results() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Manuals").await;
    let manual = pdf(&[
        (
            "Introduction\nThe pump moves cooling water through the plant.",
            Some("Introduction"),
        ),
        (
            "Maintenance\nReplace the mechanical seal every two years.",
            Some("Maintenance"),
        ),
        ("Order seal kits from the regional depot.", None),
    ]);
    let id = server.upload_ok(&key, &source, "manual.pdf", &manual).await;
    let doc = server.wait_for_status(&key, &source, &id, "ready").await;
    assert_eq!(doc["pageCount"], 3);

    let found = body(
        server
            .search(&key, json!({"query": "depot seal kits", "limit": 5}))
            .await,
    )
    .await;
    let top = &found["results"][0];
    assert_eq!(top["metadata"]["page"], 3, "{found}");
    assert_eq!(top["metadata"]["section"], "Maintenance", "{found}");
    assert!(
        top["content"].as_str().unwrap().contains("regional depot"),
        "{found}"
    );
}

#[tokio::test]
async fn hostile_pdfs_fail_with_their_reason_and_good_ones_beside_them_are_ready() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Hostile").await;
    let good = pdf(&[("Turbine blades are inspected after every flight.", None)]);
    let truncated = good[..good.len() / 2].to_vec();
    let locked = encrypted_pdf(&good, "secret");
    let open = encrypted_pdf(
        &pdf(&[("The hangar doors close at nine in the evening.", None)]),
        "",
    );
    let scanned = image_only_pdf(2);

    let mut ids = Vec::new();
    for (name, bytes) in [
        ("truncated.pdf", &truncated),
        ("locked.pdf", &locked),
        ("scanned.pdf", &scanned),
        ("good.pdf", &good),
        ("open.pdf", &open),
    ] {
        ids.push(server.upload_ok(&key, &source, name, bytes).await);
    }
    let expected_errors = [
        "the PDF document is damaged or truncated: the file is truncated",
        "the PDF document is encrypted (password-protected)",
        "no extractable text; the file appears to be scanned",
    ];
    for (id, expected) in ids.iter().zip(expected_errors) {
        let doc = server.wait_for_status(&key, &source, id, "failed").await;
        let error = doc["error"].as_str().unwrap();
        assert!(error.starts_with(expected), "{error}");
    }
    server
        .wait_for_status(&key, &source, &ids[3], "ready")
        .await;
    server
        .wait_for_status(&key, &source, &ids[4], "ready")
        .await;
    let found = body(
        server
            .search(&key, json!({"query": "hangar doors turbine blades"}))
            .await,
    )
    .await;
    let mut names: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, vec!["good.pdf", "open.pdf"], "{found}");
}
