//! A document's metadata: given at upload (single and bulk), shown in the record and in search
//! results, changed by a merge patch without processing the document again, refused with a
//! reason when it breaks the rules, and kept within the key's scope.

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::helpers::sse::sse_events;
use crate::helpers::{TestServer, assert_error, body};

/// Uploads `bytes` as `name` with the `metadata` field's text.
async fn upload_with(
    server: &TestServer,
    key: &str,
    source: &str,
    name: &str,
    bytes: &[u8],
    metadata: &str,
) -> reqwest::Response {
    let form = Form::new().text("metadata", metadata.to_owned()).part(
        "file",
        Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    );
    server
        .client
        .post(server.url(&format!("/api/v1/sources/{source}/documents/upload")))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap()
}

async fn patch(server: &TestServer, key: &str, path: &str, body_json: &Value) -> reqwest::Response {
    server
        .client
        .patch(server.url(path))
        .bearer_auth(key)
        .json(body_json)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn metadata_is_given_at_upload_shown_and_patched_without_reprocessing() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Policies").await;
    let response = upload_with(
        &server,
        &key,
        &source,
        "leave.md",
        b"# Leave policy\n\nEmployees take twenty-five days of annual leave.\n",
        r#"{"department": "hr", "year": 2024, "public": true, "tags": ["policy", "leave"]}"#,
    )
    .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let accepted = body(response).await;
    let expected =
        json!({"department": "hr", "year": 2024, "public": true, "tags": ["policy", "leave"]});
    assert_eq!(accepted["metadata"], expected);
    let doc = accepted["id"].as_str().unwrap().to_owned();
    let ready = server.wait_for_status(&key, &source, &doc, "ready").await;
    assert_eq!(ready["metadata"], expected);

    // Search results carry the document's metadata beside the passage's own.
    let found = body(server.search(&key, json!({"query": "annual leave"})).await).await;
    let hit = &found["results"][0];
    assert_eq!(hit["document"]["metadata"], expected, "{found}");
    assert_eq!(hit["metadata"]["page"], 1);

    // A merge patch: change one key, remove one, add one; nothing is processed again.
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    let response = patch(
        &server,
        &key,
        &path,
        &json!({"metadata": {"year": 2025, "public": null, "owner": "Ana"}}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let patched = body(response).await;
    let now =
        json!({"department": "hr", "year": 2025, "tags": ["policy", "leave"], "owner": "Ana"});
    assert_eq!(patched["metadata"], now);
    assert_eq!(patched["status"], "ready");
    assert_eq!(patched["updatedAt"], ready["updatedAt"], "no reprocessing");
    let found = body(server.search(&key, json!({"query": "annual leave"})).await).await;
    assert_eq!(found["results"][0]["document"]["metadata"], now);
    assert_eq!(body(server.get(&key, &path).await).await["metadata"], now);
}

#[tokio::test]
async fn bad_metadata_is_refused_with_a_reason_and_nothing_is_stored() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Refusals").await;
    for (metadata, needle) in [
        ("not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (r#"{"bad key": 1}"#, "bad key"),
        (r#"{"nested": {"a": 1}}"#, "nested"),
        (r#"{"mixed": ["a", 2]}"#, "mixed"),
    ] {
        let response = upload_with(&server, &key, &source, "a.txt", b"some text", metadata).await;
        let error = assert_error(response, StatusCode::BAD_REQUEST, "bad_request").await;
        assert!(
            error["message"].as_str().unwrap().contains(needle),
            "{metadata}: {error}"
        );
    }
    assert!(
        server
            .documents(&key, &source)
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );

    let doc = server
        .upload_ok(&key, &source, "b.txt", b"other text")
        .await;
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    for bad in [
        json!({}),
        json!({"metadata": "x"}),
        json!({"metadata": {"k": {"deep": 1}}}),
    ] {
        assert_error(
            patch(&server, &key, &path, &bad).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
    }
    // Read keys may not patch; a key of another source does not find the document.
    let reader = server.key(Permission::Read).await;
    assert_error(
        patch(&server, &reader, &path, &json!({"metadata": {"a": 1}})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let other = server.create_source(&key, "Other").await;
    let scoped = server
        .key_with(
            Permission::ReadWrite,
            SourceScope::only([other.parse().unwrap()]),
            None,
        )
        .await;
    assert_error(
        patch(&server, &scoped, &path, &json!({"metadata": {"a": 1}})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_eq!(
        body(server.get(&key, &path).await).await["metadata"],
        json!({})
    );
}

#[tokio::test]
async fn a_bulk_uploads_metadata_goes_to_each_of_its_documents() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Bulk").await;
    let form = Form::new()
        .part("file", Part::bytes(b"one".to_vec()).file_name("1.txt"))
        .text("metadata", r#"{"batch": "b7"}"#)
        .part("file", Part::bytes(b"two".to_vec()).file_name("2.txt"));
    let report = body(server.upload_bulk(&key, &source, form).await).await;
    assert_eq!(report["accepted"], 2, "{report}");
    for entry in report["results"].as_array().unwrap() {
        assert_eq!(entry["document"]["metadata"], json!({"batch": "b7"}));
    }
}

#[tokio::test]
async fn a_filter_restricts_search_before_the_limit_and_malformed_ones_are_400() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Handbooks").await;
    // Twelve documents about pumps; one in three is from 2025, and only one is Spanish.
    let mut ids = Vec::new();
    for i in 0..12 {
        let year = if i % 3 == 0 { 2025 } else { 2023 };
        let language = if i == 7 { "es" } else { "en" };
        let text = format!("# Pump {i}\n\nThe pump number {i} needs priming before it starts.\n");
        let response = upload_with(
            &server,
            &key,
            &source,
            &format!("pump-{i}.md"),
            text.as_bytes(),
            &format!(r#"{{"year": {year}, "language": "{language}", "tags": ["pump", "p{i}"]}}"#),
        )
        .await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        ids.push(body(response).await["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        server.wait_for_status(&key, &source, id, "ready").await;
    }
    let names = |found: &Value| -> Vec<String> {
        found["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["document"]["name"].as_str().unwrap().to_owned())
            .collect()
    };

    // The narrowest filter still finds its one document with a limit of one.
    let found = body(
        server
            .search(
                &key,
                json!({"query": "pump priming", "limit": 1, "filter": {"language": "es"}}),
            )
            .await,
    )
    .await;
    assert_eq!(names(&found), ["pump-7.md"], "{found}");

    // Four documents of 2025: every result is one of them, and all four are found.
    let found = body(
        server
            .search(
                &key,
                json!({"query": "pump", "limit": 10, "filter": {"year": {"$gte": 2025}}}),
            )
            .await,
    )
    .await;
    let mut got = names(&found);
    got.sort();
    got.dedup();
    assert_eq!(
        got,
        ["pump-0.md", "pump-3.md", "pump-6.md", "pump-9.md"],
        "{found}"
    );

    // $or, $in on a list, and a filter that matches nothing.
    let found = body(
        server
            .search(
                &key,
                json!({"query": "pump", "filter": {"$or": [{"tags": "p1"}, {"tags": {"$in": ["p2"]}}]}}),
            )
            .await,
    )
    .await;
    let mut got = names(&found);
    got.sort();
    got.dedup();
    assert_eq!(got, ["pump-1.md", "pump-2.md"]);
    let found = body(
        server
            .search(&key, json!({"query": "pump", "filter": {"year": 1999}}))
            .await,
    )
    .await;
    assert!(found["results"].as_array().unwrap().is_empty());

    // An answer draws only on the documents the filter matches.
    let response = server
        .post_json(
            &key,
            "/api/v1/generate",
            &json!({"query": "Which pump needs priming?", "filter": {"language": "es"}}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut events = sse_events(response);
    let mut done = None;
    while let Some(event) = events.recv().await {
        if event.event == "done" {
            done = Some(event.data);
        }
    }
    let done = done.expect("a done event");
    let cited: Vec<&str> = done["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["documentName"].as_str().unwrap())
        .collect();
    assert!(!cited.is_empty(), "{done}");
    assert!(cited.iter().all(|name| *name == "pump-7.md"), "{done}");
    assert_error(
        server
            .post_json(
                &key,
                "/api/v1/generate",
                &json!({"query": "pumps?", "filter": {"$and": "x"}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;

    // Malformed filters are 400 and say where.
    for (filter, needle) in [
        (json!({"year": {"$gtt": 1}}), "filter.year"),
        (
            json!({"$or": [{"a": 1}, {"b": {"$in": "x"}}]}),
            "filter.$or[1].b.$in",
        ),
        (json!({"year": {"$gt": true}}), "filter.year.$gt"),
    ] {
        let error = assert_error(
            server
                .search(&key, json!({"query": "pump", "filter": filter}))
                .await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
        assert!(
            error["message"].as_str().unwrap().contains(needle),
            "{filter}: {error}"
        );
    }

    // A key of another source cannot probe these documents' metadata through a filter.
    let other = server.create_source(&key, "Other").await;
    let scoped = server
        .key_with(
            Permission::Read,
            SourceScope::only([other.parse().unwrap()]),
            None,
        )
        .await;
    let found = body(
        server
            .search(
                &scoped,
                json!({"query": "pump", "filter": {"language": "es"}}),
            )
            .await,
    )
    .await;
    assert!(found["results"].as_array().unwrap().is_empty(), "{found}");
}
