//! Cluster mode through the real API: two nodes, each with its own data directory (keyword
//! index, vector replica), sharing one PostgreSQL database. What one node makes ready or
//! deletes reaches the other's indexes through the store's index feed.
//!
//! These run on PostgreSQL in both passes of the suite (a cluster needs a shared store).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use quire::Config;
use quire_core::{ManualClock, Permission, Secret, SourceScope};
use serde_json::{Value, json};
use tokio::time::Instant;

use quire_parse::fixtures::pdf;

use crate::crash::{
    BROKEN_EVERY, DOCUMENTS, SYNC_ITEMS, Server, create_source, documents,
    each_chunk_is_found_once, each_item_once, every_document_ends_as_it_should, key_from_cli,
    marker, one_final_event_per_document, post_json, register_final_events, second_run_end,
    sync_folder, unfinished, upload_documents,
};
use crate::generate::{PUMP_PAGES, start_generate, three_questions_are_answered_in_arrival_order};
use crate::helpers::fake_llm::{Fake, Upstream, with_llm};
use crate::helpers::webhook_receiver::Receiver;
use crate::helpers::{TestServer, body, postgres_schema_url, start_time, test_config};
use crate::semantic::{model_dir, renamed_model};

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

/// The results of `query` through `server` (at most `limit`), best first.
async fn results(server: &TestServer, key: &str, query: &str, limit: usize) -> Vec<Value> {
    let response = server
        .search(key, json!({"query": query, "limit": limit}))
        .await;
    assert_eq!(response.status(), 200);
    body(response).await["results"].as_array().unwrap().clone()
}

/// The names of the documents a search through `server` returns, best first.
async fn found(server: &TestServer, key: &str, query: &str) -> Vec<String> {
    results(server, key, query, 5)
        .await
        .iter()
        .map(|r| r["document"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The results of `query` through `server`: each hit's document, page, text and score.
async fn ranking(server: &TestServer, key: &str, query: &str) -> Vec<(String, Value, String, f64)> {
    results(server, key, query, 10)
        .await
        .iter()
        .map(|r| {
            (
                r["document"]["id"].as_str().unwrap().to_owned(),
                r["metadata"]["page"].clone(),
                r["content"].as_str().unwrap().to_owned(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Whether the best result of `query` through `server` is a chunk of the document `name`.
async fn finds_first(server: &TestServer, key: &str, query: &str, name: &str) -> bool {
    found(server, key, query).await.first().map(String::as_str) == Some(name)
}

/// Chunks in a node's own vector replica, as its version endpoint reports them.
async fn replica_chunks(server: &TestServer) -> u64 {
    let admin = server.key(Permission::Admin).await;
    let health: Value = body(server.get(&admin, "/api/health/version").await).await;
    health["semanticSearch"]["embeddedChunks"].as_u64().unwrap()
}

/// Polls `check` until it holds, and returns how long that took; fails after [`FOLLOW_BOUND`].
async fn within_bound<F: Future<Output = bool>>(what: &str, check: impl FnMut() -> F) -> Duration {
    within(FOLLOW_BOUND, what, check).await
}

/// Polls `check` until it holds, and returns how long that took; fails after `bound`.
async fn within<F: Future<Output = bool>>(
    bound: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) -> Duration {
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < bound,
            "{what} did not happen within {bound:?}"
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
        finds_first(&second, &key, "windowsill", "pets.md").await
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
    assert!(finds_first(&second, &key, "a feline napping", "pets.md").await);
    // Both nodes rank from indexes with the same contents: the same results, the same scores.
    // The replica holding both documents does not mean the keyword index has committed them
    // too (its commits are grouped; a loaded CI machine once searched the second node in
    // between, and the windowsill chunk scored from its vector alone), so the rankings are
    // awaited within the bound rather than compared once.
    for query in [
        "windowsill",
        "a feline napping",
        "storm at sea",
        "afternoon",
    ] {
        within_bound(&format!("both nodes ranking {query:?} alike"), || async {
            ranking(&first, &key, query).await == ranking(&second, &key, query).await
        })
        .await;
    }

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
    assert!(finds_first(&second, &key, "rain and wind on the coast", "weather.md").await);
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
    // Workers finish documents in any order, so the feed need not hold them in upload order,
    // and the late node's index may commit one note a commit after another: each is waited for.
    for i in 1..5 {
        let (marker, note) = (format!("marker{i}"), format!("note{i}.md"));
        within_bound(&format!("the late node finding {note}"), || async {
            finds_first(&late, &key, &marker, &note).await
        })
        .await;
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

/// What a `quire serve` node of the process cluster gets: the shared database, originals in
/// the S3 test server under a prefix of the test's own, short leases so the jobs of a killed
/// node come back soon.
fn process_node_env(url: &str, prefix: &str) -> Vec<(&'static str, String)> {
    let mut env = shared_env(url, prefix);
    env.push(("QUIRE_WORKERS_LEASE_SECONDS", "3".to_owned()));
    env
}

/// [`process_node_env`] with the default lease.
fn shared_env(url: &str, prefix: &str) -> Vec<(&'static str, String)> {
    let s3 = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: run `eval \"$(scripts/s3-server start)\"` (scripts/test does)"
            )
        })
    };
    vec![
        ("QUIRE_STORE_URL", url.to_owned()),
        (
            "QUIRE_FILES_URL",
            format!("s3://{}/{prefix}", s3("QUIRE_TEST_S3_BUCKET")),
        ),
        ("QUIRE_FILES_ENDPOINT", s3("QUIRE_TEST_S3_ENDPOINT")),
        (
            "QUIRE_FILES_ACCESS_KEY_ID",
            s3("QUIRE_TEST_S3_ACCESS_KEY_ID"),
        ),
        (
            "QUIRE_FILES_SECRET_ACCESS_KEY",
            s3("QUIRE_TEST_S3_SECRET_ACCESS_KEY"),
        ),
        ("QUIRE_FILES_ALLOW_HTTP", "true".to_owned()),
    ]
}

/// Searches through `server` with `key` and returns the status and the answer.
async fn search_through(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    query: &str,
) -> (reqwest::StatusCode, Value) {
    let response = client
        .post(server.url("/api/v1/search"))
        .bearer_auth(key)
        .json(&json!({"query": query, "limit": 10}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

/// Three `quire serve` processes on one PostgreSQL database and one S3 bucket: uploads through
/// the first, one node killed with SIGKILL while the nodes process them, searches through the
/// others, the killed node restarted. Nothing is lost or stuck, nothing indexed twice, each
/// document announced under one event id, a key's rate limit holds for the cluster as a whole,
/// and answers come from any node.
#[tokio::test]
async fn three_processes_share_the_work_and_survive_a_killed_node() {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let url = postgres_schema_url(&format!("quire_cluster_{unique}"));
    let env = || process_node_env(&url, &format!("cluster-{unique}"));
    let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
    // Every node searches for every document: far more than the default rate limit.
    let key = key_from_cli(dirs[0].path(), env(), &["--rate-limit", "100000"]).await;
    let client = reqwest::Client::new();
    let mut nodes = Vec::new();
    for dir in &dirs {
        nodes.push(Server::start_with(dir.path(), env()).await);
    }
    let (receiver, hook_url) = Receiver::start(Duration::ZERO).await;
    register_final_events(&client, &nodes[1], &key, &receiver, &hook_url).await;
    let source = create_source(&client, &nodes[2], &key, "Cluster").await;

    // The third node dies halfway through the uploads, while the nodes work on them.
    let mut ids = BTreeMap::new();
    upload_documents(
        &client,
        &nodes[0],
        &key,
        &source,
        0..DOCUMENTS / 2,
        &mut ids,
    )
    .await;
    let unfinished_at_kill = unfinished(&documents(&client, &nodes[1], &key, &source).await);
    nodes.pop().unwrap().kill().await;
    upload_documents(
        &client,
        &nodes[0],
        &key,
        &source,
        DOCUMENTS / 2..DOCUMENTS,
        &mut ids,
    )
    .await;
    eprintln!("documents unfinished when the third node was killed: {unfinished_at_kill}");
    assert!(
        unfinished_at_kill > 0,
        "every document was finished before the kill: the test would prove nothing"
    );

    // Its jobs come back when their leases run out; the other two finish everything.
    every_document_ends_as_it_should(&client, &nodes[1], &key, &source, &ids).await;

    // The killed node comes back and catches up from the feed; every node finds each chunk
    // exactly once.
    nodes.push(Server::start_with(dirs[2].path(), env()).await);
    // Documents become ready in the order their jobs end, not the order of upload: wait until
    // each one is found, whatever its place in the feed. The other nodes follow the feed too
    // (a document another node finished reaches their indexes with their next commit), so
    // each of them is waited for in the same way.
    let started = Instant::now();
    for node in &nodes {
        for (id, i) in ids.iter().filter(|(_, i)| !i.is_multiple_of(BROKEN_EVERY)) {
            while search_through(&client, node, &key, &marker(*i)).await.1["results"][0]["document"]
                ["id"]
                != id.as_str()
            {
                assert!(
                    started.elapsed() < FOLLOW_BOUND,
                    "{} never found {}",
                    node.url(""),
                    marker(*i)
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    for node in &nodes {
        each_chunk_is_found_once(&client, node, &key, &ids).await;
    }
    one_final_event_per_document(&receiver, &ids).await;

    // An answer through the restarted node cites the document that holds the answer.
    let (id, i) = ids.iter().find(|(_, i)| **i == 3).unwrap();
    let answer = client
        .post(nodes[2].url("/api/v1/generate"))
        .bearer_auth(&key)
        .json(&json!({"query": format!("How often is the {} valve checked?", marker(*i))}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let stream = answer.text().await.unwrap();
    assert!(stream.contains("event: done"), "{stream}");
    assert!(
        stream.contains(id.as_str()),
        "the answer does not cite {id}: {stream}"
    );

    // A key allowed 10 searches a minute gets 10 from the cluster, not 10 per node. A minute
    // boundary in the middle resets the window: then the count is taken again.
    let limited = key_from_cli(dirs[0].path(), env(), &["--rate-limit", "10"]).await;
    for attempt in 0.. {
        let mut allowed = 0;
        let mut windows = BTreeSet::new();
        for n in 0..12 {
            let response = client
                .post(nodes[n % 3].url("/api/v1/search"))
                .bearer_auth(&limited)
                .json(&json!({"query": "valve"}))
                .send()
                .await
                .unwrap();
            windows.insert(
                response.headers()["x-ratelimit-reset"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            );
            if response.status() == 200 {
                allowed += 1;
            } else {
                assert_eq!(response.status(), 429);
            }
        }
        if windows.len() == 1 {
            assert_eq!(allowed, 10, "searches allowed across three nodes");
            break;
        }
        assert!(attempt < 2, "the rate window kept changing");
        // Start again in the next window with a fresh count.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for node in nodes {
        node.kill().await;
    }
}

/// Longest a document whose node died may wait for another node, with the default lease.
const TAKEOVER_BOUND: Duration = Duration::from_secs(60);

/// With the default configuration (no lease set), the documents a node was reading when it was
/// killed with SIGKILL are taken over by another node within [`TAKEOVER_BOUND`] and end ready.
/// Scans are read with OCR (about a second a page), so the killed node is surely mid-work.
#[tokio::test]
async fn a_killed_nodes_documents_are_taken_over_within_a_minute_by_default() {
    use quire_parse::fixtures::{PdfPage, scanned_pdf};
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let url = postgres_schema_url(&format!("quire_takeover_{unique}"));
    let tesseract = std::env::var("QUIRE_TEST_TESSERACT")
        .ok()
        .filter(|p| !p.is_empty())
        .expect("QUIRE_TEST_TESSERACT must name the tesseract program (run scripts/ocr-deps)");
    let env = || {
        let mut env = shared_env(&url, &format!("takeover-{unique}"));
        env.push(("QUIRE_OCR_ENABLED", "true".to_owned()));
        env.push(("QUIRE_OCR_PROGRAM", tesseract.clone()));
        env
    };
    let dirs = [(); 2].map(|()| tempfile::tempdir().unwrap());
    let key = key_from_cli(dirs[0].path(), env(), &[]).await;
    let client = reqwest::Client::new();

    // The node to be killed runs alone, so the documents it is reading are its own.
    let doomed = Server::start_with(dirs[0].path(), env()).await;
    let source = create_source(&client, &doomed, &key, "Scans").await;
    let lines: Vec<String> = (1..=8)
        .map(|page| format!("Page {page} of the pump inspection report."))
        .collect();
    let scan = |n: usize| {
        let mut pages: Vec<PdfPage<'_>> = lines.iter().map(|l| PdfPage::Scan(l)).collect();
        // Distinct bytes: the same bytes twice would be one document.
        pages.push(PdfPage::Text(if n == 0 {
            "First scan."
        } else {
            "Second scan."
        }));
        scanned_pdf(&pages)
    };
    for n in 0..2 {
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(scan(n)).file_name(format!("scan-{n}.pdf")),
        );
        let response = client
            .post(doomed.url(&format!("/api/v1/sources/{source}/documents/upload")))
            .bearer_auth(&key)
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED);
    }
    let processing = |docs: &Value| {
        docs.as_array()
            .unwrap()
            .iter()
            .filter(|d| d["status"] == "processing")
            .count()
    };
    within_bound("the claim of both scans", || async {
        processing(&documents(&client, &doomed, &key, &source).await) == 2
    })
    .await;

    // Another node joins; the first is killed while it reads both scans.
    let survivor = Server::start_with(dirs[1].path(), env()).await;
    doomed.kill().await;
    let killed = Instant::now();
    let at_kill = documents(&client, &survivor, &key, &source).await;
    assert_eq!(
        processing(&at_kill),
        2,
        "the killed node was not reading both scans: {at_kill}"
    );
    let claimed_at = |docs: &Value| -> BTreeMap<String, Value> {
        docs.as_array()
            .unwrap()
            .iter()
            .map(|d| (d["id"].as_str().unwrap().to_owned(), d["updatedAt"].clone()))
            .collect()
    };
    let before = claimed_at(&at_kill);

    // Each document is taken over (claimed again, which sets its `updatedAt`) within the
    // bound, then ends ready.
    let taken_over = RefCell::new(BTreeMap::new());
    let last = RefCell::new(Value::Null);
    let (to, node, with, of) = (&client, &survivor, &key, &source);
    let (taken, seen, before) = (&taken_over, &last, &before);
    within(
        TAKEOVER_BOUND + Duration::from_secs(120),
        "the end of both scans",
        move || async move {
            let docs = documents(to, node, with, of).await;
            for (id, updated) in claimed_at(&docs) {
                if before[&id] != updated {
                    taken
                        .borrow_mut()
                        .entry(id)
                        .or_insert_with(|| killed.elapsed());
                }
            }
            let finished = unfinished(&docs) == 0;
            *seen.borrow_mut() = docs;
            finished
        },
    )
    .await;
    let (taken_over, docs) = (taken_over.into_inner(), last.into_inner());
    eprintln!(
        "taken over after the kill: {taken_over:?}; all ready after {:?}",
        killed.elapsed()
    );
    for doc in docs.as_array().unwrap() {
        assert_eq!(doc["status"], "ready", "{doc}");
        let after = taken_over[doc["id"].as_str().unwrap()];
        assert!(
            after < TAKEOVER_BOUND,
            "{} was taken over only after {after:?}",
            doc["id"]
        );
    }
    survivor.kill().await;
}

/// A node killed mid-sync never restarts: once the run's lease runs out, another node ends it
/// as failed, runs the sync again and takes the rest, and no item is added twice.
#[tokio::test]
async fn a_killed_nodes_sync_run_is_ended_by_another_node_which_syncs_again() {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let url = postgres_schema_url(&format!("quire_syncover_{unique}"));
    let folder = sync_folder();
    let env = || {
        let mut env = process_node_env(&url, &format!("syncover-{unique}"));
        env.push((
            "QUIRE_CONNECTORS_FOLDER_ROOTS",
            folder.path().display().to_string(),
        ));
        env
    };
    let dirs = [(); 2].map(|()| tempfile::tempdir().unwrap());
    let key = key_from_cli(dirs[0].path(), env(), &[]).await;
    let client = reqwest::Client::new();

    // The node to be killed runs alone, so the run is its own.
    let doomed = Server::start_with(dirs[0].path(), env()).await;
    let created = post_json(
        &client,
        &doomed,
        &key,
        "/api/v1/sources",
        json!({"name": "Notes", "type": "folder",
            "sync": {"path": folder.path(), "intervalSeconds": 0}}),
    )
    .await;
    let source = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let count = async |server: &Server| {
        documents(&client, server, &key, &source)
            .await
            .as_array()
            .map_or(0, Vec::len)
    };
    within(Duration::from_secs(60), "a run under way", || async {
        count(&doomed).await >= 10
    })
    .await;
    doomed.kill().await;
    let killed = Instant::now();

    let survivor = Server::start_with(dirs[1].path(), env()).await;
    let taken = count(&survivor).await;
    assert!(
        taken < SYNC_ITEMS,
        "the run ended before the kill ({taken} documents)"
    );
    let (ended, interrupted) =
        second_run_end(&client, &survivor, &key, &source, Duration::from_secs(180)).await;
    eprintln!(
        "the sync was run again and done {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(interrupted["status"], "failed", "{interrupted}");
    assert!(
        interrupted["error"].as_str().unwrap().contains("lease"),
        "{interrupted}"
    );
    each_item_once(&ended, &documents(&client, &survivor, &key, &source).await);
    survivor.kill().await;
}

/// A node configured with another embedding model than a running node's is refused at start
/// with a clear reason (their vectors would not compare); a keyword-only node is not; once the
/// running node stops, the cluster may change its model.
#[tokio::test]
async fn a_node_with_another_embedding_model_is_refused_while_one_runs() {
    let url = postgres_schema_url(&format!("quire_cluster_{}", uuid::Uuid::new_v4().simple()));
    let first = TestServer::start_with(node(&url)).await;
    let models = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    node(&url)(&mut config);
    config.embedding.model_dir = Some(renamed_model(models.path()));
    let clock = Arc::new(ManualClock::new(start_time()));
    let refused = quire::build(&config, clock.clone()).await.err();
    let message = format!("{:#}", refused.expect("the node was not refused"));
    assert!(
        message.contains("must use one model") && message.contains("minilm-renamed"),
        "{message}"
    );

    let mut keyword_only = config.clone();
    keyword_only.embedding.model_dir = None;
    quire::build(&keyword_only, clock.clone()).await.unwrap();

    first.stop().await;
    quire::build(&config, clock).await.unwrap();
}

/// Questions asked through different nodes stand in one line: positions count every waiting
/// question of the cluster, the slot (one, for the whole cluster) goes to the head of the
/// line whichever node it came through, and the model sees the questions in order of arrival.
#[tokio::test]
async fn questions_through_any_node_stand_in_one_line() {
    let (fake, llm) = Fake::start(Upstream::Gated, "Open the vent valve [1].").await;
    let url = postgres_schema_url(&format!("quire_cluster_{}", uuid::Uuid::new_v4().simple()));
    let config = |c: &mut Config| {
        c.store.url = Some(Secret::new(url.clone()));
        with_llm(llm.clone())(c);
        c.llm.max_concurrent = 1;
        c.llm.timeout_seconds = 30;
    };
    let first = TestServer::start_with(config).await;
    // Originals are on the first node's disk here: only it processes documents.
    let second = TestServer::start_with(|c| {
        config(c);
        c.workers.count = 0;
    })
    .await;
    let key = first.key(Permission::ReadWrite).await;
    let source = first.create_source(&key, "Manuals").await;
    let id = first
        .upload_ok(&key, &source, "pump-manual.pdf", &pdf(&PUMP_PAGES))
        .await;
    first.wait_for_status(&key, &source, &id, "ready").await;
    within_bound("the second node finding the manual", || async {
        finds_first(&second, &key, "primed", "pump-manual.pdf").await
    })
    .await;
    // Questions 1 and 3 through the first node, 2 through the second: one line.
    three_questions_are_answered_in_arrival_order(&fake, |n| {
        let node = if n == 2 { &second } else { &first };
        start_generate(
            node,
            &key,
            json!({"query": format!("question {n} about the pump")}),
        )
    })
    .await;
}

/// A new version processed on one node and a metadata change made through it are seen by
/// searches on the other node within 1.5 s of their commit, and meanwhile the other node,
/// whose index has not applied the switch yet, finds the document exactly once, never none and
/// never both versions.
#[tokio::test]
async fn a_version_switch_and_a_metadata_change_reach_every_node_within_a_second_and_a_half() {
    let url = postgres_schema_url(&format!("quire_cluster_{}", uuid::Uuid::new_v4().simple()));
    let first = TestServer::start_with(node(&url)).await;
    let second = Arc::new(
        TestServer::start_with(|c| {
            node(&url)(c);
            c.workers.count = 0;
        })
        .await,
    );
    let key = first
        .key_with(Permission::ReadWrite, SourceScope::All, Some(100_000))
        .await;
    let source = first.create_source(&key, "Shared").await;
    let doc = first
        .upload_ok(
            &key,
            &source,
            "pets.md",
            b"# Pets\n\nThe cat sleeps on the warm windowsill all afternoon.",
        )
        .await;
    first.wait_for_status(&key, &source, &doc, "ready").await;
    within_bound("the second node finding the first version", || async {
        finds_first(&second, &key, "windowsill", "pets.md").await
    })
    .await;

    // Searches on the second node all through the switch: always one result of the document.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (second, key, done) = (Arc::clone(&second), key.clone(), Arc::clone(&done));
        tokio::spawn(async move {
            let mut searches = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let names = found(&second, &key, "cat sleeps afternoon").await;
                assert_eq!(
                    names,
                    ["pets.md"],
                    "missing or found twice on the second node"
                );
                searches += 1;
            }
            searches
        })
    };
    let path = format!("/api/v1/sources/{source}/documents/{doc}");
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(
            b"# Pets\n\nThe cat sleeps on the sunny balcony all afternoon.".to_vec(),
        )
        .file_name("pets.md"),
    );
    // Through the first node: its workers read the original where it stored it (a cluster
    // shares originals through S3; these test nodes keep them on their own disks).
    let response = first
        .client
        .put(first.url(&path))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    // The switch commits on the first node (whose workers process it); then the clock runs.
    within_bound("the switch", || async {
        body(first.get(&key, &path).await).await["version"] == 2
    })
    .await;
    let seen = within(
        Duration::from_millis(1_500),
        "the second node finding the new version",
        || async {
            let hits = results(&second, &key, "cat sleeps afternoon", 10).await;
            hits.len() == 1 && hits[0]["content"].as_str().unwrap().contains("balcony")
        },
    )
    .await;
    eprintln!("the second node found the new version {seen:?} after the switch");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(watcher.await.unwrap() > 0);

    // A metadata change through the first node filters searches on the second at once.
    let patched = first
        .client
        .patch(first.url(&path))
        .bearer_auth(&key)
        .json(&json!({"metadata": {"room": "balcony"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 200);
    let seen = within(
        Duration::from_millis(1_500),
        "the second node filtering by the new metadata",
        || async {
            let response = second
                .search(&key, json!({"query": "cat", "filter": {"room": "balcony"}}))
                .await;
            body(response).await["results"].as_array().unwrap().len() == 1
        },
    )
    .await;
    eprintln!("the second node filtered by the new metadata after {seen:?}");
}
