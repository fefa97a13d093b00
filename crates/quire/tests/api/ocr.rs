//! OCR through the upload API: a scanned PDF, a mixed PDF, a multi-page TIFF and a deck whose
//! slides are pictures become `ready` and phrases from their scans are found on the right
//! pages; with OCR off, a scan and a picture-only deck fail with a reason that says how to turn
//! it on; a decompression bomb fails alone; the version endpoint tells admin keys whether OCR
//! is on.

use std::time::Duration;

use quire_core::Permission;
use quire_parse::fixtures::{PdfPage, PptxSlide, png, png_claiming, pptx, scanned_pdf, tiff};
use serde_json::json;

use crate::helpers::{TestServer, body, ocr_config};

/// The top result for `query`: its document name and page.
async fn top_hit(server: &TestServer, key: &str, query: &str) -> (String, u64) {
    let found = body(
        server
            .search(key, json!({"query": query, "limit": 3}))
            .await,
    )
    .await;
    let top = &found["results"][0];
    (
        top["document"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        top["metadata"]["page"].as_u64().unwrap_or(0),
    )
}

#[tokio::test]
async fn scanned_documents_become_ready_and_their_phrases_are_found_on_their_pages() {
    let server = TestServer::start_with(ocr_config).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Scans").await;
    let scan = scanned_pdf(&[
        PdfPage::Scan("Inspection report for the northern pumping station."),
        PdfPage::Scan("The impeller showed heavy corrosion on three vanes."),
    ]);
    let mixed = scanned_pdf(&[
        PdfPage::Text("Minutes of the harbour board meeting in March."),
        PdfPage::Scan("The dredger contract was awarded to the lowest bidder."),
    ]);
    let fax = tiff(&[
        "Delivery note for twelve pallets of roofing slate.",
        "Signed on receipt by the quarry foreman.",
    ]);
    let bomb = png_claiming(100_000, 100_000);
    let mut ids = Vec::new();
    for (name, bytes) in [
        ("scan.pdf", &scan),
        ("mixed.pdf", &mixed),
        ("fax.tiff", &fax),
        ("bomb.png", &bomb),
    ] {
        ids.push(server.upload_ok(&key, &source, name, bytes).await);
    }
    for id in &ids[..3] {
        // Tesseract reads each scanned page in a debug build while the other tests run: on a
        // 2-core AMD EPYC without AVX-512 the first scan took over 20 s, so it gets longer.
        let doc = server
            .wait_for_status_within(&key, &source, id, "ready", Duration::from_secs(120))
            .await;
        assert_eq!(doc["pageCount"], 2, "{doc}");
    }
    let doc = server
        .wait_for_status(&key, &source, &ids[3], "failed")
        .await;
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.starts_with("the PNG image claims 100000 × 100000 pixels"),
        "{error}"
    );

    assert_eq!(
        top_hit(&server, &key, "impeller corrosion vanes").await,
        ("scan.pdf".into(), 2)
    );
    assert_eq!(
        top_hit(&server, &key, "dredger contract lowest bidder").await,
        ("mixed.pdf".into(), 2)
    );
    assert_eq!(
        top_hit(&server, &key, "harbour board meeting").await,
        ("mixed.pdf".into(), 1)
    );
    assert_eq!(
        top_hit(&server, &key, "quarry foreman receipt").await,
        ("fax.tiff".into(), 2)
    );

    let admin = server.key(Permission::Admin).await;
    let version = body(server.get(&admin, "/api/health/version").await).await;
    assert_eq!(version["ocr"]["enabled"], true, "{version}");
    assert_eq!(version["ocr"]["languages"], json!(["eng"]), "{version}");
    let public = body(server.get(&key, "/api/health/version").await).await;
    assert!(public.get("ocr").is_none(), "{public}");
}

/// A deck of two slides, each only a picture of `texts[i]`.
fn picture_deck(texts: [&str; 2]) -> Vec<u8> {
    let (first, second) = (png(texts[0]), png(texts[1]));
    let slide = |pictures| PptxSlide {
        pictures,
        ..PptxSlide::default()
    };
    pptx(
        &[slide(&["slide1.png"]), slide(&["slide2.png"])],
        &[("slide1.png", &first), ("slide2.png", &second)],
    )
}

#[tokio::test]
async fn a_deck_of_slide_pictures_becomes_ready_and_its_phrases_are_found_on_their_slides() {
    let server = TestServer::start_with(ocr_config).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Decks").await;
    let deck = picture_deck([
        "Safety briefing for the harbour cranes, winter season.",
        "Wind above forty knots stops every crane on the quay.",
    ]);
    let id = server
        .upload_ok(&key, &source, "briefing.pptx", &deck)
        .await;
    let doc = server.wait_for_status(&key, &source, &id, "ready").await;
    assert_eq!(doc["pageCount"], 2, "{doc}");
    assert_eq!(
        top_hit(&server, &key, "wind forty knots quay").await,
        ("briefing.pptx".into(), 2)
    );
    assert_eq!(
        top_hit(&server, &key, "safety briefing harbour cranes").await,
        ("briefing.pptx".into(), 1)
    );
}

#[tokio::test]
async fn with_ocr_off_a_scan_fails_with_how_to_turn_it_on() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Scans").await;
    let scan = scanned_pdf(&[PdfPage::Scan("A page nobody can read without OCR.")]);
    let id = server.upload_ok(&key, &source, "scan.pdf", &scan).await;
    let doc = server.wait_for_status(&key, &source, &id, "failed").await;
    let error = doc["error"].as_str().unwrap();
    assert!(error.contains("appears to be scanned"), "{error}");
    assert!(error.contains("ocr.enabled = auto or true"), "{error}");

    let deck = picture_deck(["A slide nobody can read.", "Another one."]);
    let id = server.upload_ok(&key, &source, "deck.pptx", &deck).await;
    let doc = server.wait_for_status(&key, &source, &id, "failed").await;
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.starts_with("the PPTX presentation holds only pictures and OCR is not enabled"),
        "{error}"
    );
    assert!(error.contains("ocr.enabled = auto or true"), "{error}");

    let admin = server.key(Permission::Admin).await;
    let version = body(server.get(&admin, "/api/health/version").await).await;
    assert_eq!(version["ocr"]["enabled"], false, "{version}");
    assert!(
        version["ocr"]["reason"]
            .as_str()
            .unwrap()
            .contains("ocr.enabled = false"),
        "{version}"
    );
}
