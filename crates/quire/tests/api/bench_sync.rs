//! `quire bench sync` end to end on a small site and bucket: each origin's first sync takes
//! every item, and an unchanged re-sync fetches none again (counted at the origin).

use tokio::process::Command;

use crate::helpers::successful_stdout;

#[tokio::test]
async fn bench_sync_counts_each_origins_requests_for_a_first_and_an_unchanged_run() {
    // The S3 settings come from the environment `scripts/s3-server start` sets.
    crate::syncs::s3("QUIRE_TEST_S3_ENDPOINT");
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["bench", "sync", "--items", "12", "--json"]),
    )
    .await;
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let rows = report["rows"].as_array().expect("rows");
    let row = |origin: &str, run: &str| {
        rows.iter()
            .find(|r| r["origin"] == origin && r["run"] == run)
            .unwrap_or_else(|| panic!("no {origin} {run} row: {stdout}"))
            .clone()
    };
    for origin in ["web-sitemap", "web-crawl", "s3"] {
        let first = row(origin, "first");
        assert_eq!(
            (first["added"].as_u64(), first["items"].as_u64()),
            (Some(12), Some(12)),
            "{first}"
        );
        let again = row(origin, "unchanged");
        assert_eq!(
            (again["added"].as_u64(), again["unchanged"].as_u64()),
            (Some(0), Some(12)),
            "{again}"
        );
    }
    let kinds = |origin: &str, run: &str| row(origin, run)["by_kind"].clone();
    // Robots, the sitemap and each page once; again, the sitemap's lastmod spares every page.
    assert_eq!(
        kinds("web-sitemap", "first"),
        serde_json::json!({"robots 200": 1, "sitemap 200": 1, "page 200": 12})
    );
    assert_eq!(
        kinds("web-sitemap", "unchanged"),
        serde_json::json!({"robots 200": 1, "sitemap 200": 1})
    );
    // A crawl asks about every page again, and each answers 304 without a body.
    assert_eq!(kinds("web-crawl", "unchanged")["page 304"], 12);
    assert!(kinds("web-crawl", "unchanged")["page 200"].is_null());
    // S3: one listing, then a HEAD and a GET per new object; unchanged, the listing alone.
    assert_eq!(
        kinds("s3", "first"),
        serde_json::json!({"list": 1, "head": 12, "get": 12})
    );
    assert_eq!(kinds("s3", "unchanged"), serde_json::json!({"list": 1}));
}
