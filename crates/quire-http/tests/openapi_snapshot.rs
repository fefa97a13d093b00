//! `docs/openapi.json` is the generated OpenAPI document, committed so that every change to
//! the API is visible in review. This test fails when the two differ; run it with
//! `QUIRE_UPDATE_SNAPSHOTS=1` to rewrite the file, and commit the result.

use std::path::PathBuf;

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn docs_openapi_json_is_the_generated_document() {
    let generated = quire_http::openapi_json();
    let path = snapshot_path();
    if std::env::var_os("QUIRE_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write docs/openapi.json");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first_difference = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || "one is a prefix of the other".to_owned(),
                |i| format!("first difference at line {}", i + 1),
            );
        panic!(
            "docs/openapi.json is not the document the code generates ({first_difference}).\n\
             If the API change is intended, update it with\n    \
             QUIRE_UPDATE_SNAPSHOTS=1 cargo test -p quire-http --test openapi_snapshot\n\
             and commit the new file."
        );
    }
}

#[test]
fn the_document_is_openapi_3_1_with_every_operation() {
    let document: serde_json::Value =
        serde_json::from_str(&quire_http::openapi_json()).expect("valid JSON");
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    let operations: usize = paths
        .values()
        .map(|item| item.as_object().map_or(0, |ops| ops.len()))
        .sum();
    // 25 Agent API operations, the version endpoint and this document.
    assert_eq!(operations, 28, "{:?}", paths.keys().collect::<Vec<_>>());
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let webhooks = document["webhooks"].as_object().expect("webhooks");
    assert_eq!(webhooks.len(), 5);
    let search = &paths["/api/v1/search"]["post"]["responses"];
    for status in ["200", "400", "401", "429", "500", "503"] {
        assert!(search.get(status).is_some(), "search lacks {status}");
    }
    assert!(search["200"]["headers"].get("X-Request-Id").is_some());
    assert_eq!(search["401"]["$ref"], "#/components/responses/Unauthorized");
    let version = &paths["/api/health/version"]["get"];
    assert!(version["responses"].get("401").is_none());
}
