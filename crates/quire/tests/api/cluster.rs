//! Cluster mode through the real API: two nodes, each with its own data directory (keyword
//! index, vector replica), sharing one PostgreSQL database. What one node makes ready or
//! deletes reaches the other's indexes through the store's index feed.
//!
//! These run on PostgreSQL in both passes of the suite (a cluster needs a shared store).

use std::time::Duration;

use quire::Config;
use quire_core::{Permission, Secret, SourceScope};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::helpers::{TestServer, body, postgres_schema_url};
use crate::semantic::model_dir;

/// Longest a test waits for the other node to follow. The feed is polled every 200 ms, so this
/// is slack for a loaded CI machine, not the expected delay (the test prints the one seen).
const FOLLOW_BOUND: Duration = Duration::from_secs(10);

/// A configuration that joins the test's cluster: the shared database, the same model.
fn node(url: &str) -> impl Fn(&mut Config) + '_ {
    move |c: &mut Config| {
        c.store.url = Some(Secret::new(url.to_owned()));
        c.embedding.model_dir = Some(model_dir());
    }
}

/// The names of the documents a search through `server` returns, best first.
async fn found(server: &TestServer, key: &str, query: &str) -> Vec<String> {
    let response = server
        .search(key, json!({"query": query, "limit": 5}))
        .await;
    assert_eq!(response.status(), 200);
    body(response).await["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Chunks in a node's own vector replica, as its version endpoint reports them.
async fn replica_chunks(server: &TestServer) -> u64 {
    let admin = server.key(Permission::Admin).await;
    let health: Value = body(server.get(&admin, "/api/health/version").await).await;
    health["semanticSearch"]["embeddedChunks"].as_u64().unwrap()
}

/// Polls `check` until it holds, and returns how long that took; fails after [`FOLLOW_BOUND`].
async fn within_bound<F: Future<Output = bool>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> Duration {
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < FOLLOW_BOUND,
            "{what} did not happen within {FOLLOW_BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn what_one_node_makes_ready_or_deletes_reaches_the_other_nodes_indexes() {
    let url = postgres_schema_url(&format!("quire_cluster_{}", uuid::Uuid::new_v4().simple()));
    let first = TestServer::start_with(node(&url)).await;
    // The second node runs no workers: everything it finds, the first node processed.
    let second = TestServer::start_with(|c| {
        node(&url)(c);
        c.workers.count = 0;
    })
    .await;
    // Keys live in the shared store: one issued through the first node works on the second.
    // Polling searches would soon meet the default rate limit.
    let key = first
        .key_with(Permission::ReadWrite, SourceScope::All, Some(100_000))
        .await;
    let source = first.create_source(&key, "Shared").await;
    let pets = first
        .upload_ok(
            &key,
            &source,
            "pets.md",
            b"# Pets\n\nThe cat sleeps on the warm windowsill all afternoon.",
        )
        .await;
    let weather = first
        .upload_ok(
            &key,
            &source,
            "weather.md",
            b"# Weather\n\nHeavy rain and strong winds are expected along the coast tonight.",
        )
        .await;
    first.wait_for_status(&key, &source, &pets, "ready").await;
    first
        .wait_for_status(&key, &source, &weather, "ready")
        .await;

    // By its words: the keyword index followed.
    let seen = within_bound("the second node finding the word", || async {
        found(&second, &key, "windowsill")
            .await
            .first()
            .map(String::as_str)
            == Some("pets.md")
    })
    .await;
    eprintln!("the second node found a document made ready on the first after {seen:?}");
    // By its meaning only (no word in common): the vectors reached the second node's replica.
    // Its backfill ran at its start, before the documents existed, so they were copied from
    // what the first node stored, not embedded again.
    within_bound(
        "the second node's replica holding both documents' vectors",
        || async { replica_chunks(&second).await == 2 },
    )
    .await;
    let names = found(&second, &key, "a feline napping").await;
    assert_eq!(
        names.first().map(String::as_str),
        Some("pets.md"),
        "{names:?}"
    );

    // Deleted through the second node: the first node's indexes let it go.
    let deleted = second
        .delete(&key, &format!("/api/v1/sources/{source}/documents/{pets}"))
        .await;
    assert_eq!(deleted.status(), 204);
    within_bound(
        "the first node's replica dropping the deleted document",
        || async { replica_chunks(&first).await == 1 },
    )
    .await;
    for server in [&first, &second] {
        let names = found(server, &key, "windowsill").await;
        assert!(!names.contains(&"pets.md".to_owned()), "{names:?}");
    }
    assert_eq!(
        found(&second, &key, "rain and wind on the coast")
            .await
            .first()
            .map(String::as_str),
        Some("weather.md")
    );
}

/// A node that joins later (an empty data directory) replays the feed and finds everything.
#[tokio::test]
async fn a_node_that_joins_later_replays_the_feed() {
    let url = postgres_schema_url(&format!("quire_cluster_{}", uuid::Uuid::new_v4().simple()));
    let first = TestServer::start_with(node(&url)).await;
    // Polling searches would soon meet the default rate limit.
    let key = first
        .key_with(Permission::ReadWrite, SourceScope::All, Some(100_000))
        .await;
    let source = first.create_source(&key, "Shared").await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let text = format!("# Note {i}\n\nmarker{i} appears only in note {i}.");
        ids.push(
            first
                .upload_ok(&key, &source, &format!("note{i}.md"), text.as_bytes())
                .await,
        );
    }
    for id in &ids {
        first.wait_for_status(&key, &source, id, "ready").await;
    }
    let gone = ids.remove(0);
    let deleted = first
        .delete(&key, &format!("/api/v1/sources/{source}/documents/{gone}"))
        .await;
    assert_eq!(deleted.status(), 204);

    let late = TestServer::start_with(|c| {
        node(&url)(c);
        c.workers.count = 0;
    })
    .await;
    within_bound("the late node finding the last note", || async {
        found(&late, &key, "marker4")
            .await
            .first()
            .map(String::as_str)
            == Some("note4.md")
    })
    .await;
    for i in 1..5 {
        let names = found(&late, &key, &format!("marker{i}")).await;
        assert_eq!(names.first(), Some(&format!("note{i}.md")), "{names:?}");
    }
    assert!(
        !found(&late, &key, "marker0")
            .await
            .contains(&"note0.md".to_owned())
    );
    within_bound("the late node's replica holding the four notes", || async {
        replica_chunks(&late).await == 4
    })
    .await;
}
