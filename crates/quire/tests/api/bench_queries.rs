//! `quire bench queries` end to end: a small BEIR corpus ingested by a server the command
//! starts, then searched over HTTP by one and by three concurrent clients.

use tokio::process::Command;

use crate::helpers::successful_stdout;
use crate::semantic::model_dir;

#[tokio::test]
async fn bench_queries_reports_a_row_per_client_count() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = [
        ("d1", "Pumps", "Prime the pump before starting it."),
        ("d2", "Valves", "Close the valve before replacing the seal."),
        ("d3", "Filters", "Change the water filter every six months."),
    ]
    .map(|(id, title, text)| serde_json::json!({"_id": id, "title": title, "text": text}))
    .map(|line| format!("{line}\n"))
    .concat();
    let queries = ["how to prime a pump", "replace a seal", "water filter"]
        .map(|text| format!("{}\n", serde_json::json!({"_id": text, "text": text})))
        .concat();
    let (corpus_path, queries_path) = (dir.path().join("corpus.jsonl"), dir.path().join("q.jsonl"));
    std::fs::write(&corpus_path, corpus).unwrap();
    std::fs::write(&queries_path, queries).unwrap();
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args([
                "bench",
                "queries",
                "--corpus",
                corpus_path.to_str().unwrap(),
            ])
            .args(["--queries", queries_path.to_str().unwrap()])
            .args(["--clients", "1,3", "--seconds", "0.5"])
            .env("QUIRE_EMBEDDING_MODEL_DIR", model_dir()),
    )
    .await;
    assert!(
        stdout.contains("3 documents (3 ready, 0 failed, 0 held)"),
        "{stdout}"
    );
    for clients in ["1", "3"] {
        let row: Vec<f64> = stdout
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|fields| fields.len() == 6 && fields[0] == clients)
            .unwrap_or_else(|| panic!("no row for {clients} clients: {stdout}"))
            .iter()
            .map(|f| f.parse().unwrap())
            .collect();
        assert!(row[1] > 0.0 && row[5] >= 1.0, "{clients}: {row:?}");
        assert!(
            row[2] <= row[3] && row[3] <= row[4],
            "percentiles in order: {row:?}"
        );
    }
}
