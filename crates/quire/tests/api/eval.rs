//! `quire eval retrieval` on a small BEIR-layout corpus written by the test: the product's own
//! pipeline ranks the judged documents in every mode, and the report carries the metrics.

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
    // `mode` and the embedding model directory (None: unset) vary; the data does not.
    let eval = |mode: &'static str, model: Option<std::path::PathBuf>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quire"));
        command
            .args(["eval", "retrieval", "--mode", mode])
            .args(["--corpus", &path("corpus.jsonl")])
            .args(["--queries", &path("queries.jsonl")])
            .args(["--qrels", &path("qrels.tsv")]);
        match model {
            Some(dir) => command.env("QUIRE_EMBEDDING_MODEL_DIR", dir),
            None => command
                .env_remove("QUIRE_EMBEDDING_MODEL_DIR")
                .env("QUIRE_EMBEDDING_USE_CACHED_MODEL", "false"),
        };
        async move { command.output().await.unwrap() }
    };
    let output = eval("keyword", None).await;
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("judged queries 2"), "{stdout}");
    let keyword = stdout.lines().find(|l| l.starts_with("keyword ")).unwrap();
    assert!(keyword.contains(" 1.0000 "), "{stdout}");

    let without_model = eval("vector", None).await;
    assert!(!without_model.status.success());
    let error = String::from_utf8(without_model.stderr).unwrap();
    assert!(error.contains("needs an embedding model"), "{error}");

    let all = eval("all", Some(model_dir())).await;
    let stdout = String::from_utf8(all.stdout).unwrap();
    assert!(
        all.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&all.stderr)
    );
    for mode in ["keyword ", "vector ", "hybrid "] {
        let row = stdout.lines().find(|l| l.starts_with(mode)).unwrap();
        assert!(row.contains(" 1.0000 "), "{mode}: {stdout}");
    }
    assert!(
        stdout.contains("embed with local:all-MiniLM-L6-v2@"),
        "{stdout}"
    );

    // A kept data directory is reused: the second run skips ingestion and ranks the same.
    let data = dir.path().join("data");
    let kept = |extra: &'static [&'static str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quire"));
        command
            .args(["eval", "retrieval", "--mode", "hybrid", "--sweep"])
            .args(["--corpus", &path("corpus.jsonl")])
            .args(["--queries", &path("queries.jsonl")])
            .args(["--qrels", &path("qrels.tsv")])
            .args(["--data-dir", data.to_str().unwrap()])
            .args(extra)
            .env("QUIRE_EMBEDDING_MODEL_DIR", model_dir());
        async move { command.output().await.unwrap() }
    };
    let first = String::from_utf8(kept(&[]).await.stdout).unwrap();
    assert!(first.contains("chunks/s"), "{first}");
    assert!(first.contains("fusion sweep"), "{first}");
    let second = kept(&["--fusion", "rrf"]).await;
    let second = String::from_utf8(second.stdout).unwrap();
    assert!(second.contains("ingested by an earlier run"), "{second}");
    assert!(second.contains("rrf fusion"), "{second}");
    let row = second.lines().find(|l| l.starts_with("hybrid ")).unwrap();
    assert!(row.contains(" 1.0000 "), "{second}");
}

/// The embedding model `scripts/test` fetched (see DEVELOPERS.md).
fn model_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("QUIRE_TEST_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/quire-models/all-MiniLM-L6-v2")
        });
    assert!(
        dir.join("model.safetensors").is_file(),
        "no model in {}: run scripts/fetch-model",
        dir.display()
    );
    dir
}
