//! PostgreSQL lost while a node runs: the node's connections go through a TCP relay the test
//! can cut. While it is cut, requests answer 503 `unavailable` with `Retry-After` (never hang,
//! never 500); once it is restored the node serves again by itself.
//!
//! Runs on PostgreSQL in both passes of the suite (the outage is the database's).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quire_core::{Permission, Secret, SourceScope};
use reqwest::StatusCode;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::helpers::{TestServer, assert_error, postgres_schema_url};

/// A TCP relay to `upstream` that can be cut (every connection dropped, new ones refused) and
/// restored.
struct Relay {
    port: u16,
    up: Arc<AtomicBool>,
    connections: Arc<Mutex<JoinSet<()>>>,
}

impl Relay {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let (accepting, relayed) = (Arc::clone(&up), Arc::clone(&connections));
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !accepting.load(Ordering::SeqCst) {
                    // The database is "down": the connection closes at once.
                    continue;
                }
                let upstream = upstream.clone();
                relayed.lock().await.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            port,
            up,
            connections,
        }
    }

    async fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.connections.lock().await.abort_all();
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_node_whose_database_goes_away_answers_503_and_recovers_by_itself() {
    let direct = postgres_schema_url(&format!("quire_outage_{}", uuid::Uuid::new_v4().simple()));
    // postgres://user@host:port/db?… : the relay takes the place of host:port.
    let authority_start = direct.find('@').unwrap() + 1;
    let authority_end = authority_start + direct[authority_start..].find('/').unwrap();
    let relay = Relay::start(direct[authority_start..authority_end].to_owned()).await;
    let relayed = format!(
        "{}127.0.0.1:{}{}",
        &direct[..authority_start],
        relay.port,
        &direct[authority_end..]
    );
    let server = TestServer::start_with(|c| c.store.url = Some(Secret::new(relayed))).await;
    let key = server
        .key_with(Permission::ReadWrite, SourceScope::All, Some(100_000))
        .await;
    let search = || server.search(&key, json!({"query": "pump"}));
    assert_eq!(search().await.status(), StatusCode::OK);

    relay.cut().await;
    let asked = Instant::now();
    let response = search().await;
    let waited = asked.elapsed();
    let retry_after = response.headers().get("retry-after").cloned();
    assert_error(response, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    assert!(retry_after.is_some(), "no Retry-After");
    // At most the pool's wait for a connection (15 s), not a hang.
    assert!(
        waited < Duration::from_secs(20),
        "answered after {waited:?}"
    );
    eprintln!("with the database away, a search answered 503 after {waited:?}");

    relay.restore();
    let restored = Instant::now();
    loop {
        let status = search().await.status();
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            restored.elapsed() < Duration::from_secs(30),
            "the node did not recover within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "the node served again {:?} after the database came back",
        restored.elapsed()
    );
    // Writes work again too.
    let created = server
        .post_json(
            &key,
            "/api/v1/sources",
            &json!({"name": "after the outage"}),
        )
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
}

/// A database that cannot be reached when `quire serve` starts: it exits with a non-zero code
/// and says which database, with the password masked.
#[tokio::test]
async fn serve_with_an_unreachable_database_exits_naming_it_without_its_password() {
    // Port 1 on the loopback: nothing listens there, so the connection is refused at once.
    let dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_quire"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("QUIRE_DATA_DIR")
        .env(
            "QUIRE_STORE_URL",
            "postgres://quire:pg-hunter2@127.0.0.1:1/quire",
        )
        .env("QUIRE_EMBEDDING_USE_CACHED_MODEL", "false")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("postgres://quire:***@127.0.0.1:1/quire"),
        "the database is not named: {stderr}"
    );
    assert!(
        !stderr.contains("hunter2"),
        "the password was printed: {stderr}"
    );
}
