//! `quire bench ingest` end to end: a small BEIR corpus uploaded through the HTTP API of a
//! server the command starts, with the chunks counted by estimate and by the model's tokens.

use tokio::process::Command;

use crate::semantic::model_dir;

#[tokio::test]
async fn bench_ingest_reports_rates_and_stages_and_model_tokens_make_one_chunk_of_a_fitting_document()
 {
    let dir = tempfile::tempdir().unwrap();
    // 200 words that are one WordPiece token each: over the estimate's 192-word target, well
    // within the model's 256-token window, and within the 384 words (512 estimated tokens) up
    // to which a document of one page and one section stays whole.
    let words = ["pump", "valve", "water", "seal", "the", "is", "and", "of"];
    let fitting: Vec<&str> = words.iter().cycle().take(200).copied().collect();
    let corpus = format!(
        "{}\n{}\n",
        serde_json::json!({"_id": "d1", "title": "Pumps", "text": "Prime the pump."}),
        serde_json::json!({"_id": "d2", "title": "Valves", "text": fitting.join(" ")}),
    );
    let path = dir.path().join("corpus.jsonl");
    std::fs::write(&path, corpus).unwrap();
    let run = |count: &'static str, whole_document_tokens: &'static str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quire"));
        command
            .args(["bench", "ingest", "--corpus", path.to_str().unwrap()])
            .args(["--embed-sample", "5"])
            // One file a request, two requests at once.
            .args(["--batch", "1", "--uploads-in-flight", "2"])
            .env("QUIRE_EMBEDDING_MODEL_DIR", model_dir())
            .env("QUIRE_CHUNKING_COUNT", count)
            .env(
                "QUIRE_CHUNKING_WHOLE_DOCUMENT_TOKENS",
                whole_document_tokens,
            );
        async move { command.output().await.unwrap() }
    };
    // Estimated and cut at the target: 1 + 2 chunks; kept whole (the default), or counted in
    // the model's tokens: one chunk each.
    for (count, whole_document_tokens, chunks) in [
        ("estimate", "0", 3),
        ("estimate", "512", 2),
        ("model", "0", 2),
    ] {
        let output = run(count, whole_document_tokens).await;
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("documents               2 (2 ready, 0 failed, 0 held for review)"),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("chunks                  {chunks} (")),
            "{count}, {whole_document_tokens}: {stdout}"
        );
        for stage in ["parse", "screen", "embed", "index", "store"] {
            let line = stdout
                .lines()
                .find(|l| l.trim_start().starts_with(stage))
                .unwrap_or_else(|| panic!("no {stage} line: {stdout}"));
            assert!(line.ends_with("(2 timed)"), "{line}");
        }
        assert!(stdout.contains("embedder alone "), "{stdout}");
        assert!(stdout.contains("peak RSS "), "{stdout}");
    }
}
