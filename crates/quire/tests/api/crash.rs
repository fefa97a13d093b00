//! The crash suite: `quire serve` as a real process, killed with SIGKILL again and again while
//! it processes uploads and delivers webhooks. Whatever the moment of each kill, once a server
//! runs again every document ends `ready` or `failed` with a reason, each chunk is in the index
//! once, and every document's final event reaches the receiver under one event id (the
//! receiver may see that id more than once, which is why it is there).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::helpers::webhook_receiver::Receiver;

/// Documents uploaded: enough that processing is under way at every kill.
pub(crate) const DOCUMENTS: usize = 40;
/// Every seventh upload is a broken PDF, which must end `failed` with its reason.
pub(crate) const BROKEN_EVERY: usize = 7;

/// A `quire serve` process and its address.
pub(crate) struct Server {
    child: Child,
    address: String,
}

impl Server {
    /// Starts `quire serve` on `dir` and waits until it listens.
    /// Its lease outlasts the test: the jobs a kill cut short come back through the start-up
    /// recovery, not through their leases running out.
    async fn start(dir: &Path) -> Server {
        let mut env = crate::helpers::store_env(dir);
        env.push(("QUIRE_WORKERS_LEASE_SECONDS", "600".to_owned()));
        Self::start_with(dir, env).await
    }

    /// Starts `quire serve` on `dir` with `env` added (a shared store, S3 originals, …).
    pub(crate) async fn start_with(dir: &Path, env: Vec<(&'static str, String)>) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .env_remove("QUIRE_DATA_DIR")
            .env("QUIRE_EMBEDDING_USE_CACHED_MODEL", "false")
            .env("QUIRE_WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
            .env("QUIRE_WORKERS_COUNT", "2")
            // A job cut short counts as an attempt (so a file that kills the server cannot
            // loop for ever); this many kills could use up the default 3 of a good document.
            .env("QUIRE_WORKERS_MAX_ATTEMPTS", "10")
            .env("RUST_LOG", "info")
            .envs(env)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some((_, url)) = line.split_once("listening on ") {
                    return url.trim().to_owned();
                }
            }
            panic!("the server exited before listening");
        })
        .await
        .expect("the server did not start");
        // Keep draining the log so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Server { child, address }
    }

    /// SIGKILL: no shutdown code runs.
    pub(crate) async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }
}

async fn admin_key(dir: &Path) -> String {
    key_from_cli(dir, crate::helpers::store_env(dir), &[]).await
}

/// An admin key made by `quire keys create` on `dir` with `env` (and `args` added).
pub(crate) async fn key_from_cli(
    dir: &Path,
    env: Vec<(&'static str, String)>,
    args: &[&str],
) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["keys", "create", "--name", "crash", "--permission", "admin"])
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .arg("--json")
        .env_remove("QUIRE_DATA_DIR")
        .envs(env)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    created["key"].as_str().unwrap().to_owned()
}

/// A word no other document contains, so a search for it finds this document's chunks only.
pub(crate) fn marker(i: usize) -> String {
    format!("crashmarker{i:03}")
}

fn upload_bytes(i: usize) -> (String, Vec<u8>) {
    if i.is_multiple_of(BROKEN_EVERY) {
        // Distinct bytes: the same bytes twice would be one document.
        (
            format!("broken-{i}.pdf"),
            format!("%PDF-1.7 cut short {i}").into_bytes(),
        )
    } else {
        let body = format!(
            "# Note {i}\n\nThe {} valve is checked every {i} days before the pump starts.\n",
            marker(i)
        );
        (format!("note-{i}.md"), body.into_bytes())
    }
}

pub(crate) async fn documents(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    source: &str,
) -> Value {
    let response = client
        .get(server.url(&format!("/api/v1/sources/{source}/documents")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

/// Documents not yet `ready` or `failed`.
pub(crate) fn unfinished(docs: &Value) -> usize {
    docs.as_array()
        .unwrap()
        .iter()
        .filter(|d| !matches!(d["status"].as_str(), Some("ready" | "failed")))
        .count()
}

#[tokio::test]
async fn killing_the_server_mid_work_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let key = admin_key(dir.path()).await;
    let client = reqwest::Client::new();
    let (receiver, hook_url) = Receiver::start(Duration::ZERO).await;

    let mut server = Server::start(dir.path()).await;
    register_final_events(&client, &server, &key, &receiver, &hook_url).await;
    let source = create_source(&client, &server, &key, "Crash").await;

    // Uploads are durable once answered; the first kill comes while they are processed.
    let mut ids = BTreeMap::new();
    upload_documents(&client, &server, &key, &source, 0..DOCUMENTS, &mut ids).await;

    // Kill it at different stages: at once, once some work is done, and right after start-up.
    let mut kills = 0;
    let mut pending_at_kills = Vec::new();
    for wait in [
        Duration::ZERO,
        Duration::from_millis(400),
        Duration::from_millis(150),
        Duration::from_millis(700),
    ] {
        tokio::time::sleep(wait).await;
        pending_at_kills.push(unfinished(
            &documents(&client, &server, &key, &source).await,
        ));
        server.kill().await;
        kills += 1;
        server = Server::start(dir.path()).await;
    }

    eprintln!("documents unfinished at each kill: {pending_at_kills:?}");
    // The suite proves something only if work was cut short.
    assert!(
        pending_at_kills[0] > 0,
        "every document was finished before the first kill: {pending_at_kills:?}"
    );
    eprintln!("after {kills} kills:");
    every_document_ends_as_it_should(&client, &server, &key, &source, &ids).await;

    each_chunk_is_found_once(&client, &server, &key, &ids).await;
    one_final_event_per_document(&receiver, &ids).await;
    server.kill().await;
}

/// Uploads documents `numbers` ([`upload_bytes`]) through `server`; records each accepted
/// document's id with its number in `ids`.
pub(crate) async fn upload_documents(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    source: &str,
    numbers: std::ops::Range<usize>,
    ids: &mut BTreeMap<String, usize>,
) {
    for i in numbers {
        let (name, bytes) = upload_bytes(i);
        let form = Form::new().part("file", Part::bytes(bytes).file_name(name));
        let response = client
            .post(server.url(&format!("/api/v1/sources/{source}/documents/upload")))
            .bearer_auth(key)
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED);
        let doc: Value = response.json().await.unwrap();
        ids.insert(doc["id"].as_str().unwrap().to_owned(), i);
    }
}

/// Registers `hook_url` for the documents' final events through `server`, and gives `receiver`
/// the webhook's secret to verify them with.
pub(crate) async fn register_final_events(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    receiver: &Receiver,
    hook_url: &str,
) {
    let created = post_json(
        client,
        server,
        key,
        "/api/v1/webhooks",
        json!({"url": hook_url, "events": ["document.ready", "document.failed"]}),
    )
    .await;
    *receiver.secret.lock().unwrap() = created["secret"].as_str().unwrap().to_owned();
}

/// Creates a source named `name` through `server` and returns its id.
pub(crate) async fn create_source(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    name: &str,
) -> String {
    let source = post_json(
        client,
        server,
        key,
        "/api/v1/sources",
        json!({"name": name}),
    )
    .await;
    source["id"].as_str().unwrap().to_owned()
}

/// `GET`s `path` of `server` with `key` and returns the JSON answer.
pub(crate) async fn get_json(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    path: &str,
) -> Value {
    client
        .get(server.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `POST`s `body` to `path` of `server` with `key` and returns the JSON answer.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    path: &str,
    body: Value,
) -> Value {
    client
        .post(server.url(path))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits (at most 90 s) until no document of `source` is unfinished, then checks that none was
/// lost or doubled, each broken upload `failed` with its reason, and each good one `ready` with
/// its one chunk.
pub(crate) async fn every_document_ends_as_it_should(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    source: &str,
    ids: &BTreeMap<String, usize>,
) {
    let started = Instant::now();
    let docs = loop {
        let docs = documents(client, server, key, source).await;
        if unfinished(&docs) == 0 {
            break docs;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "documents still unfinished: {docs}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let docs = docs.as_array().unwrap();
    assert_eq!(docs.len(), ids.len(), "no upload lost and none doubled");
    for doc in docs {
        let i = ids[doc["id"].as_str().unwrap()];
        if i.is_multiple_of(BROKEN_EVERY) {
            assert_eq!(doc["status"], "failed", "{doc}");
            assert!(!doc["error"].as_str().unwrap_or("").is_empty(), "{doc}");
        } else {
            assert_eq!(doc["status"], "ready", "{doc}");
            assert_eq!(doc["chunkCount"], 1, "{doc}");
        }
    }
}

/// Each chunk is in the index once: a document's own word finds exactly its one chunk.
pub(crate) async fn each_chunk_is_found_once(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    ids: &BTreeMap<String, usize>,
) {
    for (id, i) in ids.iter().filter(|(_, i)| !i.is_multiple_of(BROKEN_EVERY)) {
        let found: Value = client
            .post(server.url("/api/v1/search"))
            .bearer_auth(key)
            .json(&json!({"query": marker(*i), "limit": 10}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let hits: Vec<&str> = found["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{found}"))
            .iter()
            .map(|r| r["document"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            hits,
            [id.as_str()],
            "{} found through {}: {found}",
            marker(*i),
            server.address
        );
    }
}

/// Every document's final event arrives, under one event id per document.
pub(crate) async fn one_final_event_per_document(
    receiver: &Receiver,
    ids: &BTreeMap<String, usize>,
) {
    let wanted: BTreeSet<&str> = ids.keys().map(String::as_str).collect();
    let started = Instant::now();
    loop {
        let announced: BTreeSet<String> = receiver
            .received()
            .iter()
            .map(|(_, body)| body["data"]["documentId"].as_str().unwrap().to_owned())
            .collect();
        if announced.len() == wanted.len() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {} documents announced",
            announced.len(),
            wanted.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut event_ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (event_id, body) in receiver.received() {
        let doc = body["data"]["documentId"].as_str().unwrap().to_owned();
        assert!(
            wanted.contains(doc.as_str()),
            "an event for an unknown document"
        );
        let expected = if ids[&doc].is_multiple_of(BROKEN_EVERY) {
            "document.failed"
        } else {
            "document.ready"
        };
        assert_eq!(body["event"], expected, "{body}");
        event_ids.entry(doc).or_default().insert(event_id);
    }
    for (doc, events) in &event_ids {
        assert_eq!(events.len(), 1, "{doc} was announced as {events:?}");
    }
}

/// Documents whose second versions are being processed when the server is killed again and
/// again: once a server runs again, every document has exactly one live version, the new one,
/// and a search finds it once, with the new text.
#[tokio::test]
async fn killing_the_server_during_version_switches_leaves_one_live_version() {
    const VERSIONED: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let key = admin_key(dir.path()).await;
    let client = reqwest::Client::new();
    let mut server = Server::start(dir.path()).await;
    let source = create_source(&client, &server, &key, "Versions").await;
    let text = |i: usize, edition: &str| {
        format!(
            "# Note {i}\n\nThe {} valve, {edition} edition, is checked before the pump starts.\n",
            marker(i)
        )
    };
    let upload = |i: usize, edition: &'static str| {
        let (client, server_url, key) = (
            client.clone(),
            server.url(&format!("/api/v1/sources/{source}/documents/upload")),
            key.clone(),
        );
        let body = text(i, edition);
        async move {
            let form = Form::new()
                .text("externalId", format!("notes/{i}.md"))
                .part(
                    "file",
                    Part::bytes(body.into_bytes()).file_name(format!("{i}.md")),
                );
            let response = client
                .post(server_url)
                .bearer_auth(key)
                .multipart(form)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED);
            let doc: Value = response.json().await.unwrap();
            doc["id"].as_str().unwrap().to_owned()
        }
    };
    let mut ids = BTreeMap::new();
    for i in 0..VERSIONED {
        ids.insert(upload(i, "first").await, i);
    }
    crate::helpers::poll(
        Duration::from_secs(90),
        "the first versions ready",
        || async {
            (unfinished(&documents(&client, &server, &key, &source).await) == 0).then_some(())
        },
    )
    .await;
    for i in 0..VERSIONED {
        let id = upload(i, "second").await;
        assert_eq!(ids.get(&id), Some(&i), "the same document");
    }
    let mut unswitched_at_kills = Vec::new();
    // At once (switches under way), then as the restarted server redoes them.
    for wait in [
        Duration::ZERO,
        Duration::from_millis(40),
        Duration::from_millis(120),
        Duration::from_millis(300),
    ] {
        tokio::time::sleep(wait).await;
        let docs = documents(&client, &server, &key, &source).await;
        unswitched_at_kills.push(
            docs.as_array()
                .unwrap()
                .iter()
                .filter(|d| d["version"] != 2)
                .count(),
        );
        server.kill().await;
        server = Server::start(dir.path()).await;
    }
    eprintln!("documents not yet on their second version at each kill: {unswitched_at_kills:?}");
    // The test proves something only if switches were cut short.
    assert!(
        unswitched_at_kills[0] > 0,
        "every version switched before the first kill: {unswitched_at_kills:?}"
    );

    // Every document ends on its second version, and nothing else is left to do.
    let docs = crate::helpers::poll(Duration::from_secs(90), "the versions switched", || async {
        let docs = documents(&client, &server, &key, &source).await;
        docs.as_array()
            .unwrap()
            .iter()
            .all(|d| d["version"] == 2 && d["status"] == "ready" && d.get("nextVersion").is_none())
            .then_some(docs)
    })
    .await;
    assert_eq!(docs.as_array().unwrap().len(), VERSIONED, "{docs}");
    for (id, i) in &ids {
        let detail = get_json(
            &client,
            &server,
            &key,
            &format!("/api/v1/sources/{source}/documents/{id}"),
        )
        .await;
        let statuses: Vec<&str> = detail["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["superseded", "ready"], "{detail}");
        let found: Value = client
            .post(server.url("/api/v1/search"))
            .bearer_auth(&key)
            .json(&json!({"query": marker(*i), "limit": 10}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let hits = found["results"].as_array().unwrap();
        assert_eq!(hits.len(), 1, "{} found once: {found}", marker(*i));
        assert_eq!(hits[0]["document"]["id"], id.as_str());
        let content = hits[0]["content"].as_str().unwrap();
        assert!(content.contains("second edition"), "{content}");
    }
    server.kill().await;
}

/// Items a killed sync run is given: enough, large enough, that the run is still taking them
/// when the kill comes.
pub(crate) const SYNC_ITEMS: usize = 300;

/// The text of item `i` of a killed sync run.
pub(crate) fn sync_item_text(i: usize) -> String {
    let filler =
        "The casing is vented and the seals are inspected before the pump starts.\n".repeat(400);
    format!(
        "# Note {i}\n\nThe {} valve is checked weekly.\n\n{filler}",
        marker(i)
    )
}

#[tokio::test]
async fn killing_the_server_mid_sync_fails_the_run_and_the_next_adds_nothing_twice() {
    let folder = sync_folder();
    let env = vec![(
        "QUIRE_CONNECTORS_FOLDER_ROOTS",
        folder.path().display().to_string(),
    )];
    kill_mid_sync(
        json!({"name": "Notes", "type": "folder",
            "sync": {"path": folder.path(), "intervalSeconds": 0}}),
        env,
        false,
    )
    .await;
}

#[tokio::test]
async fn killing_the_server_mid_s3_sync_fails_the_run_and_the_next_adds_nothing_twice() {
    let s3 = crate::syncs::s3;
    let bucket = s3("QUIRE_TEST_S3_BUCKET");
    let prefix = format!("crash-{}", uuid::Uuid::new_v4().simple());
    let objects = Path::new(&s3("QUIRE_TEST_S3_SERVER_DIR"))
        .join("data")
        .join(&bucket)
        .join(&prefix);
    std::fs::create_dir_all(&objects).unwrap();
    for i in 0..SYNC_ITEMS {
        std::fs::write(objects.join(format!("note-{i:03}.md")), sync_item_text(i)).unwrap();
    }
    kill_mid_sync(
        json!({"name": "Bucket", "type": "s3", "sync": {
            "url": format!("s3://{bucket}/{prefix}/"),
            "endpoint": s3("QUIRE_TEST_S3_ENDPOINT"), "region": "us-east-1",
            "accessKeyId": s3("QUIRE_TEST_S3_ACCESS_KEY_ID"),
            "secretAccessKey": s3("QUIRE_TEST_S3_SECRET_ACCESS_KEY"),
            "allowHttp": true, "intervalSeconds": 0}}),
        Vec::new(),
        false,
    )
    .await;
    std::fs::remove_dir_all(&objects).unwrap();
}

#[tokio::test]
async fn killing_the_server_mid_web_sync_fails_the_run_and_the_next_adds_nothing_twice() {
    // The site lives in this test's process, so it outlives the killed server.
    let site = crate::syncs_web::Site::start().await;
    let mut sitemap =
        String::from(r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#);
    for i in 0..SYNC_ITEMS {
        let path = format!("/notes/{i:03}.html");
        site.put(
            &path,
            "text/html; charset=utf-8",
            format!(
                "<html><head><title>Note {i}</title></head><body><main><p>{}</p></main></body></html>",
                sync_item_text(i)
            ),
        );
        sitemap.push_str(&format!("<url><loc>{}</loc></url>", site.url(&path)));
    }
    sitemap.push_str("</urlset>");
    site.put("/sitemap.xml", "application/xml", sitemap);
    kill_mid_sync(
        json!({"name": "Site", "type": "web",
            "sync": {"url": site.url("/sitemap.xml"), "maxPages": 1000, "intervalSeconds": 0}}),
        vec![("QUIRE_CONNECTORS_ALLOW_PRIVATE_TARGETS", "true".to_owned())],
        true,
    )
    .await;
}

/// Creates the syncing source `source` on a server (with `origin_env` added), kills the
/// server with SIGKILL while the first run takes its [`SYNC_ITEMS`] items, and starts it
/// again: the cut-short run is failed, a new run follows by itself, and each item is one
/// document. An origin that `spools` what it fetched leaves it in the data directory's
/// staging area when killed, and nothing there once the next run has ended.
async fn kill_mid_sync(source: Value, origin_env: Vec<(&'static str, String)>, spools: bool) {
    let dir = tempfile::tempdir().unwrap();
    let env = || {
        let mut env = crate::helpers::store_env(dir.path());
        env.extend(origin_env.iter().cloned());
        env
    };
    let key = admin_key(dir.path()).await;
    let client = reqwest::Client::new();
    let server = Server::start_with(dir.path(), env()).await;
    let created = post_json(&client, &server, &key, "/api/v1/sources", source).await;
    let source = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    // Killed once the run has taken some of the files but not all.
    let taken = crate::helpers::poll(Duration::from_secs(60), "a run under way", || async {
        let count = documents(&client, &server, &key, &source)
            .await
            .as_array()
            .map_or(0, Vec::len);
        (count >= 10).then_some(count)
    })
    .await;
    server.kill().await;
    assert!(
        taken < SYNC_ITEMS,
        "the run ended before the kill ({taken} documents)"
    );
    assert_eq!(
        spool_directories(dir.path()) > 0,
        spools,
        "a killed run's spool is in the data directory only if its origin spools"
    );

    let server = Server::start_with(dir.path(), env()).await;
    // The run the kill cut short is failed at start; the sync it was doing is still due, so
    // a new run comes by itself and finishes the work.
    let (ended, interrupted) =
        second_run_end(&client, &server, &key, &source, Duration::from_secs(120)).await;
    assert_eq!(interrupted["status"], "failed", "{interrupted}");
    assert!(
        interrupted["error"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{interrupted}"
    );
    assert_eq!(ended["failed"], 0, "{ended}");
    assert!(ended["unchanged"].as_u64().unwrap() >= 10, "{ended}");
    each_item_once(&ended, &documents(&client, &server, &key, &source).await);
    // The killed run's spool went at the start, the second run's when it ended.
    crate::helpers::poll(Duration::from_secs(10), "an empty staging area", || async {
        (spool_directories(dir.path()) == 0).then_some(())
    })
    .await;
    server.kill().await;
}

/// How many directories a sync spooled into `data_dir`'s staging area.
fn spool_directories(data_dir: &Path) -> usize {
    std::fs::read_dir(data_dir.join("tmp")).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .count()
    })
}

/// A temporary folder of [`SYNC_ITEMS`] Markdown files, [`sync_item_text`] each.
pub(crate) fn sync_folder() -> tempfile::TempDir {
    let folder = tempfile::tempdir().unwrap();
    for i in 0..SYNC_ITEMS {
        std::fs::write(
            folder.path().join(format!("note-{i:03}.md")),
            sync_item_text(i),
        )
        .unwrap();
    }
    folder
}

/// Waits (at most `limit`) until `source` has two sync runs, as `server` lists them, and the
/// newer one has ended; returns the newer and the older.
pub(crate) async fn second_run_end(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
    source: &str,
    limit: Duration,
) -> (Value, Value) {
    let path = format!("/api/v1/sources/{source}/syncs");
    let runs = crate::helpers::poll(limit, "the second run's end", || async {
        let runs = get_json(client, server, key, &path).await;
        let runs = runs.as_array().unwrap().clone();
        (runs.len() == 2 && runs[0]["status"] != "running").then_some(runs)
    })
    .await;
    (runs[0].clone(), runs[1].clone())
}

/// What a cut-short run stored is kept (unchanged) by the run after it, which adds the rest:
/// `ended` (that run) succeeded, and `listed` (the source's documents) holds each of the
/// [`SYNC_ITEMS`] items exactly once.
pub(crate) fn each_item_once(ended: &Value, listed: &Value) {
    assert_eq!(ended["status"], "succeeded", "{ended}");
    assert_eq!(
        ended["added"].as_u64().unwrap() + ended["unchanged"].as_u64().unwrap(),
        SYNC_ITEMS as u64,
        "{ended}"
    );
    let listed = listed.as_array().unwrap();
    let external: BTreeSet<&str> = listed
        .iter()
        .map(|d| d["externalId"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), SYNC_ITEMS, "no item added twice");
    assert_eq!(external.len(), SYNC_ITEMS);
}
