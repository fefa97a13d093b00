//! `quire bench vectors --pgvector` end to end: a small synthetic corpus in the product's index
//! and in pgvector on the test PostgreSQL server, every path measured on the same queries.

use tokio::process::Command;

use crate::helpers::successful_stdout;

/// The pgvector table's rows: (scope, path, column, recall@10, mean rows returned).
fn pgvector_rows(stdout: &str) -> Vec<(String, String, String, f64, f64)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("| scope | pgvector path"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                cells[0].to_owned(),
                cells[1].to_owned(),
                cells[2].to_owned(),
                cells[6].parse().unwrap(),
                cells[7].parse().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn bench_vectors_measures_pgvector_beside_the_index() {
    let server = std::env::var("QUIRE_TEST_POSTGRES_URL")
        .expect("QUIRE_TEST_POSTGRES_URL: run scripts/postgres start (scripts/test does)");
    let stdout = successful_stdout(
        Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["bench", "vectors", "--chunks", "3000", "--queries", "20"])
            .args(["--ef", "64", "--pgvector-queries", "20"])
            .args(["--pgvector", &server]),
    )
    .await;
    assert!(stdout.contains("pgvector 0."), "{stdout}");
    let rows = pgvector_rows(&stdout);
    // Per column: 4 HNSW rows on every scope and 3 iterative ones on each of the 4 narrower
    // scopes; one exact row per narrower scope and one planner's row per scope.
    assert_eq!(rows.len(), 2 * (5 * 4 + 4 * 3) + 4 + 5, "{stdout}");
    for (scope, path, column, recall, returned) in &rows {
        assert!((0.0..=1.0).contains(recall), "{scope} {path} {column}");
        assert!(*returned <= 10.0, "{scope} {path} {column}");
        if path.starts_with("exact") {
            // The reference is the bench's own brute force over the same vectors; no path
            // finds more rows in the scope (a small scope may hold fewer than 10 chunks).
            assert_eq!(*recall, 1.0, "{scope} {path}");
            for (_, other, column, _, found) in rows.iter().filter(|r| &r.0 == scope) {
                assert!(found <= returned, "{scope} {other} {column}: {found}");
            }
        }
        if scope == "all" && path.starts_with("HNSW") {
            assert!(*recall > 0.9, "{scope} {path} {column}: {recall}");
        }
    }
}
