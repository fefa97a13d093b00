//! `quire bench cluster` end to end: a small BEIR corpus through the embedded store and a
//! cluster of two nodes on the test PostgreSQL server.

use tokio::process::Command;

use crate::helpers::successful_stdout;

#[tokio::test]
async fn bench_cluster_reports_the_embedded_store_and_each_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let mut corpus = String::new();
    for i in 0..12 {
        let text = format!("The pump number {i} is primed before it starts; marker{i}.");
        corpus.push_str(
            &serde_json::json!({"_id": format!("d{i}"), "title": "Pumps", "text": text})
                .to_string(),
        );
        corpus.push('\n');
    }
    let queries = "{\"_id\": \"q1\", \"text\": \"how is the pump primed\"}\n\
                   {\"_id\": \"q2\", \"text\": \"marker3\"}\n";
    std::fs::write(dir.path().join("corpus.jsonl"), corpus).unwrap();
    std::fs::write(dir.path().join("queries.jsonl"), queries).unwrap();
    let server = std::env::var("QUIRE_TEST_POSTGRES_URL")
        .expect("QUIRE_TEST_POSTGRES_URL: run scripts/postgres start (scripts/test does)");
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["bench", "cluster", "--keyword-only", "--nodes", "1,2"])
            .arg("--corpus")
            .arg(dir.path().join("corpus.jsonl"))
            .arg("--queries")
            .arg(dir.path().join("queries.jsonl"))
            .args(["--postgres-url", &server]),
    )
    .await;
    assert!(stdout.starts_with("12 documents, 2 queries"), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("store "))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    for (row, label) in rows
        .iter()
        .zip(["embedded", "cluster of 1", "cluster of 2"])
    {
        assert!(row.starts_with(label), "{row}");
        let fields: Vec<&str> = row[label.len()..].split_whitespace().collect();
        // docs/s, chunks/s, chunks (one per short document), p50, p99, follow, PG CPU.
        assert_eq!(fields[2], "12", "{row}");
        for rate in &fields[..2] {
            assert!(rate.parse::<f64>().unwrap() > 0.0, "{row}");
        }
        if label == "embedded" {
            assert_eq!(&fields[5..], ["-", "-"], "{row}");
        } else {
            assert!(fields[5].parse::<f64>().is_ok(), "{row}");
            assert!(fields[6].ends_with('%'), "{row}");
        }
    }
}
