//! `quire eval retrieval` on a small BEIR-layout corpus written by the test: the product's own
//! pipeline ranks the judged documents, and the report carries the metrics.

use tokio::process::Command;

#[tokio::test]
async fn eval_retrieval_reports_metrics_on_a_beir_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = [
        (
            "d1",
            "Pumps",
            "Prime the centrifugal pump before starting it.",
        ),
        (
            "d2",
            "Seals",
            "Replace the mechanical seal every two years.",
        ),
        ("d3", "Bearings", "Grease the bearings every three months."),
    ];
    let corpus: String = corpus
        .iter()
        .map(|(id, title, text)| {
            format!(
                "{}\n",
                serde_json::json!({"_id": id, "title": title, "text": text})
            )
        })
        .collect();
    std::fs::write(dir.path().join("corpus.jsonl"), corpus).unwrap();
    std::fs::write(
        dir.path().join("queries.jsonl"),
        "{\"_id\": \"q1\", \"text\": \"mechanical seal replacement\"}\n\
         {\"_id\": \"q2\", \"text\": \"grease bearings\"}\n\
         {\"_id\": \"q3\", \"text\": \"not judged\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("qrels.tsv"),
        "query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td3\t1\n",
    )
    .unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["eval", "retrieval", "--corpus", &path("corpus.jsonl")])
        .args([
            "--queries",
            &path("queries.jsonl"),
            "--qrels",
            &path("qrels.tsv"),
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("judged queries 2"), "{stdout}");
    assert!(stdout.contains("nDCG@10        1.0000"), "{stdout}");
    assert!(stdout.contains("MRR@10         1.0000"), "{stdout}");

    let vector = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args([
            "eval",
            "retrieval",
            "--mode",
            "vector",
            "--corpus",
            &path("corpus.jsonl"),
        ])
        .args([
            "--queries",
            &path("queries.jsonl"),
            "--qrels",
            &path("qrels.tsv"),
        ])
        .output()
        .await
        .unwrap();
    assert!(!vector.status.success());
    let error = String::from_utf8(vector.stderr).unwrap();
    assert!(error.contains("not available yet"), "{error}");
}
