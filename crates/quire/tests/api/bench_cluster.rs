//! `quire bench cluster` end to end: a small BEIR corpus, uploaded twice, through the embedded
//! store and a cluster of two nodes on the test PostgreSQL server, with its quality measured
//! through the last node.

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
                   {\"_id\": \"q2\", \"text\": \"marker3\"}\n\
                   {\"_id\": \"q3\", \"text\": \"marker5 marker7\"}\n";
    // Only q2 and q3 are judged: their answers do not depend on how ties are broken. q3's
    // second relevant document is not in the corpus, so a perfect ranking scores below 1.
    let qrels = "query-id\tcorpus-id\tscore\nq2\td3\t1\nq3\td5\t1\nq3\tmissing\t1\n";
    std::fs::write(dir.path().join("corpus.jsonl"), corpus).unwrap();
    std::fs::write(dir.path().join("queries.jsonl"), queries).unwrap();
    std::fs::write(dir.path().join("qrels.tsv"), qrels).unwrap();
    let server = std::env::var("QUIRE_TEST_POSTGRES_URL")
        .expect("QUIRE_TEST_POSTGRES_URL: run scripts/postgres start (scripts/test does)");
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["bench", "cluster", "--keyword-only", "--nodes", "1,2"])
            .args(["--copies", "2"])
            .arg("--qrels")
            .arg(dir.path().join("qrels.tsv"))
            .arg("--corpus")
            .arg(dir.path().join("corpus.jsonl"))
            .arg("--queries")
            .arg(dir.path().join("queries.jsonl"))
            .args(["--postgres-url", &server]),
    )
    .await;
    assert!(
        stdout.starts_with("12 documents × 2 copies, 3 queries"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("store "))
        .skip(1)
        .take_while(|l| !l.starts_with("PostgreSQL full text"))
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    // PostgreSQL's own full-text ranking, measured once, on the first cluster's chunks.
    let full_text: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("PostgreSQL full text on the chunks of the cluster of 1 "))
        .collect();
    assert_eq!(full_text.len(), 1, "{stdout}");
    let ndcg: f64 = full_text[0]
        .split("nDCG@10 ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no nDCG in {}", full_text[0]));
    assert!((0.0..=1.0).contains(&ndcg), "{}", full_text[0]);
    for (row, label) in rows
        .iter()
        .zip(["embedded", "cluster of 1", "cluster of 2"])
    {
        assert!(row.starts_with(label), "{row}");
        let fields: Vec<&str> = row[label.len()..].split_whitespace().collect();
        // docs/s, chunks/s, chunks (one per short document), p50, p99, follow, PG CPU,
        // then the quality through the last node.
        assert_eq!(fields[2], "24", "{row}");
        for rate in &fields[..2] {
            assert!(rate.parse::<f64>().unwrap() > 0.0, "{row}");
        }
        if label == "embedded" {
            assert_eq!(&fields[5..7], ["-", "-"], "{row}");
        } else {
            assert!(fields[5].parse::<f64>().is_ok(), "{row}");
            assert!(fields[6].ends_with('%'), "{row}");
        }
        // q2: its one relevant document first (nDCG 1; the second copy of d3 is the same
        // corpus document and counts once). q3: d5 first or second among the two that match,
        // out of two relevant: 1/(1 + 1/log2 3) = 0.6131 or (1/log2 3)/… = 0.3869; d7 second
        // or first (the tie between the two markers' documents is broken by the index).
        assert_eq!(fields[7..9], ["nDCG@10", "keyword"], "{row}");
        let ndcg: f64 = fields[9].parse().unwrap();
        let q3_best = 1.0 / (1.0 + 1.0 / 3f64.log2());
        let q3_worst = (1.0 / 3f64.log2()) / (1.0 + 1.0 / 3f64.log2());
        let possible = [(1.0 + q3_best) / 2.0, (1.0 + q3_worst) / 2.0];
        assert!(
            possible.iter().any(|p| (p - ndcg).abs() < 1e-4),
            "nDCG {ndcg} is none of {possible:?}: {row}"
        );
    }
}
