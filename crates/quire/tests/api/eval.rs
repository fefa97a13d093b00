//! `quire eval retrieval` on a small BEIR-layout corpus written by the test: the product's own
//! pipeline ranks the judged documents in every mode, and the report carries the metrics.
//! `quire eval pii` on a dataset and a folder of documents written by the test.

use tokio::process::Command;

use crate::helpers::successful_stdout;

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
    // Not a terminal: progress is plain lines on stderr (the last of each step says done),
    // never mixed into the results on stdout.
    let progress = String::from_utf8_lossy(&output.stderr);
    for step in [
        "storing documents: 3/3 (",
        "processing documents: 3/3 (",
        "keyword queries: 2/2 (",
    ] {
        assert!(
            progress
                .lines()
                .any(|l| l.starts_with(step) && l.ends_with("done)")),
            "{step}: {progress}"
        );
    }
    assert!(!stdout.contains("documents: "), "{stdout}");

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

/// `quire eval pii` on a one-record dataset whose offsets are characters (a multibyte character
/// comes first) and a folder with a CV and a paper abstract: the spans are scored as matches
/// and only the CV is listed as held.
#[tokio::test]
async fn eval_pii_scores_a_dataset_and_lists_held_files() {
    let dir = tempfile::tempdir().unwrap();
    let record = serde_json::json!([{
        "full_text": "Zoë wrote: mail jane@example.com or call +44 20 7946 0958 at Acme.",
        "spans": [
            {"entity_type": "EMAIL_ADDRESS", "start_position": 16, "end_position": 32},
            {"entity_type": "PHONE_NUMBER", "start_position": 41, "end_position": 57},
            {"entity_type": "ORGANIZATION", "start_position": 61, "end_position": 65},
        ],
    }]);
    std::fs::write(dir.path().join("dataset.json"), record.to_string()).unwrap();
    let docs = dir.path().join("docs").join("txt");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("cv.txt"),
        "Jane Miller\njane.miller@example.com\n+44 7700 900123\nSoftware engineer since 2015.",
    )
    .unwrap();
    std::fs::write(
        docs.join("paper.txt"),
        "Dense Retrieval\nJohn A. Smith, Maria Garcia and Wei Zhang\nWe study claims from \
         1990-2020 (see p. 12, doi:10.1234/abcd.5678).",
    )
    .unwrap();
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["eval", "pii", "--runs", "1"])
            .arg("--dataset")
            .arg(dir.path().join("dataset.json"))
            .arg("--docs")
            .arg(dir.path().join("docs")),
    )
    .await;
    for kind in ["email ", "phone "] {
        let line = stdout.lines().find(|l| l.starts_with(kind)).unwrap();
        assert!(line.contains("1.000  1.000  1.000"), "{stdout}");
    }
    let held = stdout.split("held by the default policy:").nth(1).unwrap();
    assert!(held.contains("txt/cv.txt"), "{stdout}");
    assert!(!held.contains("paper.txt"), "{stdout}");
    assert!(stdout.contains("throughput:"), "{stdout}");
}

/// `quire eval answers` on FinanceBench's layout, with a filing written by the test: the
/// answer quotes the statement rows its question's definition names, cites their pages, and
/// the dump holds every passage the answerer was given.
#[tokio::test]
async fn eval_answers_cites_the_statement_rows_of_a_financebench_question() {
    let dir = tempfile::tempdir().unwrap();
    let pdfs = dir.path().join("pdfs");
    std::fs::create_dir(&pdfs).unwrap();
    let filing = quire_parse::fixtures::pdf(&[
        (
            "Acme Corporation makes pumps for water utilities in 40 countries.",
            None,
        ),
        (
            "Consolidated Balance Sheets\nDecember 31, 2022 2021\n\
             Total current assets 3,754 3,640\nTotal current liabilities 2,213 2,494",
            None,
        ),
        (
            "Consolidated Statements of Cash Flows\nYears ended December 31, 2022 2021\n\
             Net cash provided by operating activities 1,469 1,287",
            None,
        ),
    ]);
    std::fs::write(pdfs.join("ACME_2022_10K.pdf"), filing).unwrap();
    let question = "What is the FY2022 operating cash flow ratio for Acme? Operating cash \
                    flow ratio is defined as: cash from operations / total current \
                    liabilities. Round your answer to two decimal places.";
    let line = serde_json::json!({
        "question": question,
        "doc_name": "ACME_2022_10K",
        "evidence": [
            {"doc_name": "ACME_2022_10K", "evidence_page_num": 1},
            {"doc_name": "ACME_2022_10K", "evidence_page_num": 2},
        ],
    });
    let questions = dir.path().join("questions.jsonl");
    std::fs::write(&questions, format!("{line}\n")).unwrap();
    let dump = dir.path().join("dump.jsonl");
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["eval", "answers", "--format", "financebench"])
            .arg("--questions")
            .arg(&questions)
            .arg("--documents")
            .arg(&pdfs)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--dump")
            .arg(&dump)
            .env_remove("QUIRE_EMBEDDING_MODEL_DIR")
            .env("QUIRE_EMBEDDING_USE_CACHED_MODEL", "false"),
    )
    .await;
    assert!(
        stdout.contains("citing an evidence page   1.000"),
        "{stdout}"
    );
    let dumped: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&dump).unwrap().trim()).unwrap();
    let answer = dumped["answer"].as_str().unwrap();
    assert!(
        answer.contains("Total current liabilities 2,213 2,494")
            && answer.contains("Net cash provided by operating activities 1,469 1,287"),
        "{dumped}"
    );
    let pages = |field: &str| -> Vec<u64> {
        dumped[field]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.get("page").unwrap_or(&p[1]).as_u64().unwrap())
            .collect()
    };
    let cited = pages("cited");
    assert!(cited.contains(&2) && cited.contains(&3), "{dumped}");
    let mut retrieved = pages("retrieved");
    retrieved.sort_unstable();
    assert_eq!(retrieved, [1, 2, 3], "{dumped}");
    assert!(dumped["retrieved"][0]["content"].is_string(), "{dumped}");
}
