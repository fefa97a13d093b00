//! `quire bench filters` end to end on a small corpus: every selectivity reported, in JSON.

use tokio::process::Command;

use crate::helpers::successful_stdout;

#[tokio::test]
async fn bench_filters_reports_every_selectivity_with_exact_recall() {
    let stdout = successful_stdout(Command::new(env!("CARGO_BIN_EXE_quire")).args([
        "bench",
        "filters",
        "--chunks",
        "1000",
        "--queries",
        "10",
        "--json",
    ]))
    .await;
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in rows {
        // A corpus this small is scanned exactly whatever the filter.
        assert_eq!(row["vector"]["recall_at_10"].as_f64(), Some(1.0), "{row}");
        assert_eq!(row["vector"]["full"].as_f64(), Some(1.0), "{row}");
        assert!(row["keyword"]["recall_at_10"].is_null(), "{row}");
    }
}
