//! Real formats through the upload API: text, sections and pages come out right, hostile files
//! fail fast with a reason while good ones beside them become ready.

use quire_core::Permission;
use serde_json::json;

use crate::fixtures::{Para, docx, docx_bomb, pptx, xlsx};
use crate::helpers::{TestServer, body};

/// Search results for `query` as (document name, section, page, content).
async fn hits(server: &TestServer, key: &str, query: &str) -> Vec<(String, String, u64, String)> {
    let found = body(
        server
            .search(key, json!({"query": query, "limit": 20}))
            .await,
    )
    .await;
    found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["document"]["name"].as_str().unwrap().to_owned(),
                r["metadata"]["section"].as_str().unwrap().to_owned(),
                r["metadata"]["page"].as_u64().unwrap(),
                r["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn office_web_and_mail_formats_keep_sections_and_pages() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Formats").await;
    let word = docx(&[
        Para::Styled("Heading1", "Maintenance"),
        Para::Text("Inspect the impeller monthly."),
        Para::PageBreak,
        Para::Styled("Heading2", "Seals"),
        Para::Text("Replace the gasket yearly."),
        Para::Table(&[&["Part", "Interval"], &["Bearing", "quarterly"]]),
    ]);
    let slides = pptx(&[
        ("Roadmap", &["Ship the turbine"]),
        ("Risks", &["Budget overrun"]),
    ]);
    let sheet = xlsx(&[
        ("Teams", &[&["Team", "Wins"], &["Falcons", "12"]]),
        ("Coaches", &[&["Coach", "Team"], &["Marlowe", "Falcons"]]),
    ]);
    let page = b"<html><body><h1>Guide</h1><h2>Cleaning</h2><p>Use a soft brush.</p></body></html>";
    let csv = b"city;population\nLyon;522000\n";
    let mail = b"From: Ann <ann@example.com>\r\nTo: bob@example.com\r\nSubject: Valve test\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n\r\nThe pressure valve held at 12 bar.\r\n";
    let rtf = br"{\rtf1\ansi{\fonttbl{\f0 Arial;}}{\pard\outlinelevel0 Boiler\par}{\pard Bleed the radiators in Caf\'e9 season.\par}\page{\pard Check the flue.\par}}";
    let uploads: Vec<(&str, Vec<u8>)> = vec![
        ("manual.docx", word),
        ("plan.pptx", slides),
        ("league.xlsx", sheet),
        ("guide.html", page.to_vec()),
        ("cities.csv", csv.to_vec()),
        ("test.eml", mail.to_vec()),
        ("memo.rtf", rtf.to_vec()),
    ];
    let mut ids = Vec::new();
    for (name, bytes) in &uploads {
        ids.push(server.upload_ok(&key, &source, name, bytes).await);
    }
    let pages: Vec<u64> = {
        let mut pages = Vec::new();
        for id in &ids {
            let doc = server.wait_for_status(&key, &source, id, "ready").await;
            pages.push(doc["pageCount"].as_u64().unwrap());
        }
        pages
    };
    assert_eq!(pages, vec![2, 2, 2, 1, 1, 1, 2]);

    let gasket = hits(&server, &key, "gasket").await;
    assert_eq!(gasket[0].0, "manual.docx");
    assert_eq!(
        (gasket[0].1.as_str(), gasket[0].2),
        ("Maintenance > Seals", 2)
    );
    let bearing = hits(&server, &key, "bearing").await;
    assert!(bearing[0].3.contains("Bearing | quarterly"), "{bearing:?}");
    let risk = hits(&server, &key, "overrun").await;
    assert_eq!(
        (risk[0].0.as_str(), risk[0].1.as_str(), risk[0].2),
        ("plan.pptx", "Risks", 2)
    );
    let coach = hits(&server, &key, "Marlowe").await;
    assert_eq!((coach[0].1.as_str(), coach[0].2), ("Coaches", 2));
    assert_eq!(coach[0].3, "Coach: Marlowe; Team: Falcons");
    let brush = hits(&server, &key, "brush").await;
    assert_eq!(brush[0].1, "Guide > Cleaning");
    let lyon = hits(&server, &key, "Lyon").await;
    assert_eq!(lyon[0].3, "city: Lyon; population: 522000");
    let valve = hits(&server, &key, "pressure valve").await;
    assert_eq!(valve[0].0, "test.eml");
    let radiators = hits(&server, &key, "radiators").await;
    assert_eq!(
        (
            radiators[0].0.as_str(),
            radiators[0].1.as_str(),
            radiators[0].2
        ),
        ("memo.rtf", "Boiler", 1)
    );
    assert!(radiators[0].3.contains("Café season"), "{radiators:?}");
    let flue = hits(&server, &key, "flue").await;
    assert_eq!((flue[0].1.as_str(), flue[0].2), ("Boiler", 2));
    let header = hits(&server, &key, "Subject valve").await;
    assert!(
        header.iter().any(|h| h.3.contains("Subject: Valve test")),
        "{header:?}"
    );
}

#[tokio::test]
async fn a_zip_bomb_fails_fast_while_a_good_file_beside_it_is_ready() {
    let server = TestServer::start_with(|c| c.parsing.max_unpacked_bytes = 8 * 1024 * 1024).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Hostile").await;
    let bomb = docx_bomb(64 * 1024 * 1024);
    assert!(
        bomb.len() < 1024 * 1024,
        "the bomb is small on the wire: {}",
        bomb.len()
    );
    let good = docx(&[Para::Text("Harmless content about turbines.")]);
    let truncated = {
        let mut t = docx(&[Para::Text("Cut short")]);
        t.truncate(t.len() / 2);
        t
    };
    let bomb_id = server.upload_ok(&key, &source, "bomb.docx", &bomb).await;
    let good_id = server.upload_ok(&key, &source, "good.docx", &good).await;
    let cut_id = server
        .upload_ok(&key, &source, "cut.docx", &truncated)
        .await;

    let failed = server
        .wait_for_status(&key, &source, &bomb_id, "failed")
        .await;
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("unpacks to more than 8 MiB"), "{error}");
    let failed = server
        .wait_for_status(&key, &source, &cut_id, "failed")
        .await;
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("damaged or truncated"), "{error}");
    server
        .wait_for_status(&key, &source, &good_id, "ready")
        .await;
    assert_eq!(hits(&server, &key, "turbines").await.len(), 1);
}

/// Legacy Office through the real upload: a Word 97 `.doc` (built by quire-parse's fixtures)
/// becomes ready with its two pages and its text is found on the right page; an `.xls` keeps
/// its sheets as pages; an encrypted `.doc` fails with a reason that says what would work.
#[tokio::test]
async fn legacy_office_documents_become_ready_and_searchable() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Legacy").await;
    let word = quire_parse::fixtures::doc(
        "Turbine inspection\rCheck the \u{13} HYPERLINK \"x\" \u{14}blade roots\u{15} for cracks.\r\
         \u{c}Lubricate the gearbox every quarter.\r",
        false,
        0,
    );
    let sheet = quire_parse::fixtures::xls(&[
        ("Sites", &[&["Site", "Turbines"], &["Aberdeen", "14"]]),
        ("Crews", &[&["Crew", "Lead"], &["North", "Okafor"]]),
    ]);
    let locked = quire_parse::fixtures::doc("Secret\r", true, 0x0100);
    let word_id = server
        .upload_ok(&key, &source, "inspection.doc", &word)
        .await;
    let sheet_id = server.upload_ok(&key, &source, "sites.xls", &sheet).await;
    let locked_id = server.upload_ok(&key, &source, "locked.doc", &locked).await;

    let doc = server
        .wait_for_status(&key, &source, &word_id, "ready")
        .await;
    assert_eq!(doc["pageCount"].as_u64(), Some(2));
    let doc = server
        .wait_for_status(&key, &source, &sheet_id, "ready")
        .await;
    assert_eq!(doc["pageCount"].as_u64(), Some(2));
    let failed = server
        .wait_for_status(&key, &source, &locked_id, "failed")
        .await;
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("upload a copy without a password"),
        "{error}"
    );

    let roots = hits(&server, &key, "blade roots").await;
    assert_eq!((roots[0].0.as_str(), roots[0].2), ("inspection.doc", 1));
    assert!(
        roots[0].3.contains("Check the blade roots for cracks."),
        "{roots:?}"
    );
    assert!(!roots[0].3.contains("HYPERLINK"), "{roots:?}");
    let gearbox = hits(&server, &key, "gearbox").await;
    assert_eq!((gearbox[0].0.as_str(), gearbox[0].2), ("inspection.doc", 2));
    let okafor = hits(&server, &key, "Okafor").await;
    assert_eq!(
        (okafor[0].0.as_str(), okafor[0].1.as_str(), okafor[0].2),
        ("sites.xls", "Crews", 2)
    );
}
