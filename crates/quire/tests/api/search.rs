//! `POST /api/v1/search`: validation, ranking, limits and source filters.

use quire_core::Permission;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestServer, assert_error, body};

#[tokio::test]
async fn search_validates_its_input() {
    let server = TestServer::start().await;
    let key = server.key(Permission::Read).await;
    for bad in [
        json!({"query": ""}),
        json!({"query": "  \n\t "}),
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "limit": 101}),
        json!({"query": "x", "limit": -1}),
        json!({"query": "x", "sourceIds": []}),
        json!({"query": "x", "sourceIds": ["nope"]}),
        json!({"query": "q".repeat(4001)}),
    ] {
        let response = server.search(&key, bad.clone()).await;
        assert_error(response, StatusCode::BAD_REQUEST, "bad_request").await;
    }
    for bad in [
        json!({}),
        json!({"query": 3}),
        json!({"query": "x", "limit": "ten"}),
        json!({"query": "x", "limit": 2.5}),
    ] {
        let response = server.search(&key, bad).await;
        assert_error(response, StatusCode::BAD_REQUEST, "invalid_body").await;
    }
    let unknown = server
        .search(
            &key,
            json!({"query": "x", "sourceIds": [uuid::Uuid::new_v4()]}),
        )
        .await;
    assert_error(unknown, StatusCode::NOT_FOUND, "not_found").await;
    let ok = server
        .search(&key, json!({"query": "x", "limit": 100}))
        .await;
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(body(ok).await, json!({"results": []}));
}

#[tokio::test]
async fn results_are_ranked_limited_and_filtered_by_source() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let a = server.create_source(&key, "A").await;
    let b = server.create_source(&key, "B").await;
    let mut docs = Vec::new();
    for i in 0..12 {
        let source = if i % 2 == 0 { &a } else { &b };
        // Document i mentions "turbine" i+1 times, so more mentions rank higher.
        let text = format!(
            "# Doc {i}\n\n{} filler words here.",
            "turbine ".repeat(i + 1)
        );
        docs.push((
            source.clone(),
            server
                .upload_ok(&key, source, &format!("d{i}.md"), text.as_bytes())
                .await,
        ));
    }
    for (source, doc) in &docs {
        server.wait_for_status(&key, source, doc, "ready").await;
    }

    let default = body(server.search(&key, json!({"query": "turbines"})).await).await;
    let results = default["results"].as_array().unwrap();
    assert_eq!(results.len(), 10, "default limit is 10");
    let scores: Vec<f64> = results
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert_eq!(results[0]["document"]["name"], "d11.md");

    let three = body(
        server
            .search(&key, json!({"query": "turbine", "limit": 3}))
            .await,
    )
    .await;
    assert_eq!(three["results"].as_array().unwrap().len(), 3);

    let only_a = body(
        server
            .search(
                &key,
                json!({"query": "turbine", "sourceIds": [a], "limit": 100}),
            )
            .await,
    )
    .await;
    let only_a = only_a["results"].as_array().unwrap();
    assert_eq!(only_a.len(), 6);
    assert!(
        only_a
            .iter()
            .all(|r| r["dataSource"]["id"] == a.as_str() && r["dataSource"]["name"] == "A")
    );

    let nothing = body(server.search(&key, json!({"query": "?!"})).await).await;
    assert_eq!(nothing, json!({"results": []}));
}

/// Index entries whose documents are gone (a deletion cut short by a crash, before the start-up
/// sweep) must not cost results: the search reads the rankings deeper until it has `limit`.
#[tokio::test]
async fn stale_index_entries_do_not_cut_results_short() {
    // A shallow first reading, so that the stale entries fill all of it.
    let server = TestServer::start_with(|config| config.search.candidates = 12).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "A").await;
    let mut docs = Vec::new();
    for i in 0..30 {
        // Document i mentions "turbine" i+1 times: the last 20 rank first.
        let text = format!("# Doc {i}\n\n{} filler words.", "turbine ".repeat(i + 1));
        let name = format!("d{i}.md");
        docs.push(
            server
                .upload_ok(&key, &source, &name, text.as_bytes())
                .await,
        );
    }
    for doc in &docs {
        server.wait_for_status(&key, &source, doc, "ready").await;
    }
    // The rows of the 20 best go, their index entries stay: what a crash between the two steps
    // of a deletion leaves behind.
    let source_id = crate::helpers::source_id(&source);
    for doc in &docs[10..] {
        let id: quire_core::DocumentId = doc.parse().unwrap();
        let deleted = server
            .store
            .delete_document(
                &quire_core::SourceScope::All,
                source_id,
                id,
                chrono::Utc::now(),
            )
            .await
            .unwrap();
        assert!(deleted.is_some());
    }

    let found = body(server.search(&key, json!({"query": "turbine"})).await).await;
    let names: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"]["name"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..10).rev().map(|i| format!("d{i}.md")).collect();
    assert_eq!(names, expected, "the ten live documents, best first");
}

/// A page whose text matches in several chunks does not fill the first results: each page's
/// best chunk comes first, the page's further chunks after the other pages (unless
/// `search.spread_pages` is off).
#[tokio::test]
async fn the_first_results_cover_as_many_pages_as_they_can() {
    let spread = names_found_for_turbine(true).await;
    assert!(spread.len() >= 5, "{spread:?}");
    assert_eq!(spread[0], "long.md", "the best chunk first: {spread:?}");
    let mut shorts = spread[1..3].to_vec();
    shorts.sort_unstable();
    assert_eq!(shorts, ["b.md", "c.md"], "the other pages next: {spread:?}");
    assert!(spread[3..].iter().all(|n| n == "long.md"), "{spread:?}");

    let ranked_alone = names_found_for_turbine(false).await;
    assert_eq!(
        ranked_alone[..3],
        ["long.md", "long.md", "long.md"],
        "{ranked_alone:?}"
    );
}

/// The document names of a search for "turbine" over one long document (a single page,
/// three or more chunks mentioning turbines often) and two short ones mentioning them once.
async fn names_found_for_turbine(spread_pages: bool) -> Vec<String> {
    let server = TestServer::start_with(|c| c.search.spread_pages = spread_pages).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "A").await;
    let section = |n: usize| {
        format!(
            "## Part {n}\n\n{}{}\n\n",
            "turbine blade inspection ".repeat(20),
            "routine maintenance notes for the plant ".repeat(15)
        )
    };
    let long = format!("# Turbines\n\n{}{}{}", section(1), section(2), section(3));
    let files: [(&str, &[u8]); 3] = [
        ("long.md", long.as_bytes()),
        ("b.md", b"# B\n\nOne turbine stands by the river."),
        ("c.md", b"# C\n\nThe turbine hall is closed today."),
    ];
    for (name, bytes) in files {
        let doc = server.upload_ok(&key, &source, name, bytes).await;
        let ready = server.wait_for_status(&key, &source, &doc, "ready").await;
        if name == "long.md" {
            assert!(ready["chunkCount"].as_u64().unwrap() >= 3, "{ready}");
        }
    }
    let found = body(server.search(&key, json!({"query": "turbine"})).await).await;
    found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"]["name"].as_str().unwrap().to_owned())
        .collect()
}
