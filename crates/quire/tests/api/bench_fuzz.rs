//! `quire bench fuzz` end to end: a tiny corpus fuzzed for a few seconds through real parse
//! workers, and the same run with a stand-in worker that crashes on every input, whose inputs
//! must be counted as crashes, saved with their notes, and fail the run.

use std::path::Path;

use tokio::process::Command;

/// A corpus of three small text files.
fn corpus(dir: &Path) -> std::path::PathBuf {
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(corpus.join("notes")).unwrap();
    std::fs::write(corpus.join("guide.md"), "# Pumps\n\nPrime the pump.\n").unwrap();
    std::fs::write(corpus.join("notes/parts.csv"), "part,count\nseal,2\n").unwrap();
    std::fs::write(
        corpus.join("notes/page.html"),
        "<html><body><h1>Valves</h1><p>Close them.</p></body></html>",
    )
    .unwrap();
    corpus
}

/// The number after `label` at the start of a line of `stdout`.
fn count(stdout: &str, label: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} line: {stdout}"));
    line[label.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line}"))
}

/// The columns of the row of `format` in the per-format table.
fn row(stdout: &str, format: &str) -> Vec<u64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(format) && l[format.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {format} row: {stdout}"));
    line[format.len()..]
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn bench_fuzz_parses_every_input_in_a_worker_and_reports_each_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let findings = dir.path().join("findings");
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args([
            "bench",
            "fuzz",
            "--seconds",
            "6",
            "--seed",
            "42",
            "--jobs",
            "2",
        ])
        .args(["--corpus", corpus.to_str().unwrap()])
        .args(["--save-findings", findings.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("3 from the corpus, 13 built in; 0 files over --max-seed-kib left out"),
        "{stdout}"
    );
    let inputs = count(&stdout, "inputs ");
    assert!(inputs >= 4, "{stdout}");
    assert!(stdout.contains("with 2 parse workers, seed 42"), "{stdout}");
    // inputs, ready, failed, no reason, panicked, crashed, timeout, memory, caught.
    let total = row(&stdout, "total");
    assert_eq!(total[0], inputs, "{stdout}");
    assert_eq!(
        total[1] + total[2],
        inputs,
        "every input ready or failed: {stdout}"
    );
    assert_eq!(&total[3..6], [0, 0, 0], "{stdout}");
    assert_eq!(count(&stdout, "findings "), 0, "{stdout}");
    assert!(stderr.contains("fuzzing: "), "a progress line: {stderr}");
}

#[tokio::test]
async fn a_worker_killed_by_a_signal_is_a_saved_finding_and_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let findings = dir.path().join("findings");
    let worker = dir.path().join("worker.sh");
    std::fs::write(&worker, "#!/bin/sh\ncat >/dev/null\nkill -SEGV $$\n").unwrap();
    let mut permissions = std::fs::metadata(&worker).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&worker, permissions).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args([
            "bench",
            "fuzz",
            "--seconds",
            "1",
            "--seed",
            "7",
            "--jobs",
            "1",
        ])
        .args(["--corpus", corpus.to_str().unwrap()])
        .args(["--save-findings", findings.to_str().unwrap()])
        .env("QUIRE_PARSING_WORKER_PROGRAM", &worker)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("crashed a parse worker"), "{stderr}");
    let inputs = count(&stdout, "inputs ");
    let total = row(&stdout, "total");
    assert_eq!((total[0], total[5]), (inputs, inputs), "{stdout}");
    assert_eq!(count(&stdout, "findings "), inputs, "{stdout}");
    assert!(stdout.contains("signal: 11 (SIGSEGV)"), "{stdout}");
    // Each finding is its input and a note saying how to build it again.
    let mut saved: Vec<String> = std::fs::read_dir(&findings)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    saved.sort();
    assert_eq!(saved.len() as u64, 2 * inputs, "{saved:?}");
    let note = std::fs::read_to_string(findings.join("crashed-7-0.txt")).unwrap();
    assert!(note.contains("run seed: 7\ninput: 0\n"), "{note}");
    assert!(note.contains("--seed 7 --replay 0"), "{note}");
    assert!(note.contains("steps:\n  "), "{note}");
}
