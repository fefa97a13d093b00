use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn both_question_formats_read_pages_from_one() {
    let dir = tempfile::tempdir().unwrap();
    let ours = write(
        dir.path(),
        "q.jsonl",
        "{\"question\": \"Blade tolerance?\", \"document\": \"a.pdf\", \"pages\": [2, 3]}\n\n\
         {\"question\": \"Nothing cited\", \"document\": \"a.pdf\", \"pages\": []}\n",
    );
    let read = read_questions(&ours, QuestionFormat::Quire).unwrap();
    assert_eq!(
        read,
        vec![Question {
            text: "Blade tolerance?".into(),
            document: "a.pdf".into(),
            pages: vec![2, 3],
        }]
    );
    let zero = write(
        dir.path(),
        "zero.jsonl",
        "{\"question\": \"x\", \"document\": \"a.pdf\", \"pages\": [0]}\n",
    );
    let error = format!(
        "{:#}",
        read_questions(&zero, QuestionFormat::Quire).unwrap_err()
    );
    assert!(error.contains("question 1"), "{error}");

    let theirs = write(
        dir.path(),
        "fb.jsonl",
        "{\"question\": \"FY2015 cash?\", \"doc_name\": \"ADOBE_2015_10K\", \"evidence\": [\
         {\"doc_name\": \"ADOBE_2015_10K\", \"evidence_page_num\": 59},\
         {\"doc_name\": \"ADOBE_2015_10K\", \"evidence_page_num\": 59},\
         {\"doc_name\": \"ADOBE_2015_10K\", \"evidence_page_num\": 0}]}\n",
    );
    let read = read_questions(&theirs, QuestionFormat::Financebench).unwrap();
    assert_eq!(read[0].document, "ADOBE_2015_10K");
    assert_eq!(read[0].pages, vec![60, 1]);
}

#[test]
fn documents_are_found_with_or_without_their_extension() {
    let available = ["ADOBE_2015_10K.pdf", "notes.md", "ADOBE_2015"];
    assert_eq!(
        resolve_document("ADOBE_2015_10K", &available),
        Some("ADOBE_2015_10K.pdf")
    );
    assert_eq!(resolve_document("notes.md", &available), Some("notes.md"));
    // An exact name wins over another file's stem.
    assert_eq!(
        resolve_document("ADOBE_2015", &available),
        Some("ADOBE_2015")
    );
    assert_eq!(resolve_document("ADOBE_2016_10K", &available), None);
}

/// Two paged documents through the real pipeline, keyword search: one question answered on
/// its page, one whose evidence page shares no word with it, one about a document that is not
/// there (skipped).
#[tokio::test]
async fn a_small_corpus_scores_end_to_end() {
    let corpus = tempfile::tempdir().unwrap();
    write(
        corpus.path(),
        "turbines.md",
        "# Overview\n\nThis manual covers maintenance of the plant.\n\x0c\
         # Blades\n\nThe turbine blade tolerance is four millimetres at the root.\n\x0c\
         # Gardens\n\nThe lawn is mowed weekly.\n",
    );
    write(
        corpus.path(),
        "pumps.md",
        "# Pumps\n\nPrime the pump before starting.\n\x0c# Valves\n\nClose the valve slowly.\n",
    );
    let questions = vec![
        Question {
            text: "turbine blade tolerance".into(),
            document: "turbines".into(),
            pages: vec![2],
        },
        Question {
            text: "zeppelin hangar".into(),
            document: "pumps.md".into(),
            pages: vec![2],
        },
        Question {
            text: "anything".into(),
            document: "absent.pdf".into(),
            pages: vec![1],
        },
    ];
    let mut config = Config::default();
    config.pii.enabled = false;
    // The test binary is no `quire parse-worker`: parse on the test's own threads.
    config.parsing.isolate = false;
    use_model(&mut config, Mode::Keyword, None);
    let (_scratch, app, config) = eval_app(&config, None).await.unwrap();
    let state = app.services().clone();
    let parts = app.parts().clone();
    let files = document_files(corpus.path()).unwrap();
    let names = ingest_directory(&parts, &files, &config.data_dir)
        .await
        .unwrap();
    let mut ingested: Vec<&str> = names.values().map(String::as_str).collect();
    ingested.sort_unstable();
    assert_eq!(ingested, ["pumps.md", "turbines.md"]);
    // A second pass over the same data directory finds the documents ingested.
    let again = ingest_directory(&parts, &files, &config.data_dir)
        .await
        .unwrap();
    assert_eq!(again, names);

    let scores = evaluate(&state, &names, &questions, Mode::Keyword, false)
        .await
        .unwrap();
    assert_eq!(scores.len(), 1);
    let s = &scores[0];
    assert_eq!(s.label, "keyword");
    // The first question finds its page first; the second finds nothing at all.
    assert_eq!(s.page_recall, [0.5, 0.5, 0.5]);
    assert_eq!(s.document_recall, 0.5);
    assert!(s.p50 <= s.p99);

    // The extractive answerer cites the blade page for the first question and has nothing to
    // cite for the second.
    let cited = answer_citations(&state, &names, &questions, None)
        .await
        .unwrap();
    assert_eq!(cited.generator, "extractive");
    assert_eq!(cited.questions, 2);
    assert_eq!(cited.evidence_page, 0.5, "{cited:?}");
    assert_eq!(cited.evidence_document, 0.5, "{cited:?}");
    assert_eq!(cited.nothing, 0.5, "{cited:?}");
}
