//! The Prometheus endpoint: off by default, on its own listener when `metrics.bind` is set,
//! with the documented series after real traffic.

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::TestServer;
use crate::semantic::model_dir;

/// A loopback address where nobody listens for as long as the returned socket lives: bound,
/// never listening, so connections to it are refused and no other process can take the port.
fn refusing_address() -> (tokio::net::TcpSocket, std::net::SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = socket.local_addr().unwrap();
    (socket, address)
}

/// The value of the series `name` whose labels include every one of `labels`.
pub(crate) fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .find(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn metrics_are_scraped_with_requests_documents_stages_and_pool() {
    let server = TestServer::start_with(|c| {
        c.metrics.bind = Some("127.0.0.1:0".into());
        c.embedding.model_dir = Some(model_dir());
        c.webhooks.allow_private_targets = true;
    })
    .await;
    let key = server.key(Permission::ReadWrite).await;
    // A webhook nobody listens at: its delivery ends `unreachable`.
    let admin = server.key(Permission::Admin).await;
    let (_refusing, nobody) = refusing_address();
    let hook = format!("http://{nobody}/hook");
    let created = server
        .post_json(
            &admin,
            "/api/v1/webhooks",
            &json!({"url": hook, "events": ["document.ready"]}),
        )
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let limited = server
        .key_with(Permission::Read, SourceScope::All, Some(1))
        .await;
    let source = server.create_source(&key, "Metrics").await;
    let doc = server
        .upload_ok(
            &key,
            &source,
            "guide.md",
            b"# Pump guide\n\nPrime the pump.\n",
        )
        .await;
    server.wait_for_status(&key, &source, &doc, "ready").await;
    for _ in 0..2 {
        server.search(&limited, json!({"query": "pump"})).await;
    }
    // One answer (the extractive answerer), read to the end of its stream.
    let answer = server
        .client
        .post(server.url("/api/v1/generate"))
        .bearer_auth(&key)
        .json(&json!({"query": "How do I prime the pump?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    answer.text().await.unwrap();
    let missing = server.get(&key, "/api/v1/no-such-thing-4711").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    // The API's own listener does not serve metrics.
    assert_eq!(
        server.get(&key, "/metrics").await.status(),
        StatusCode::NOT_FOUND
    );
    // Scraped until the webhook's delivery has been attempted (it runs in the background).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let metrics = server.metrics_addr.expect("metrics.bind is set");
    let text = loop {
        let scraped = reqwest::get(format!("http://{metrics}/metrics"))
            .await
            .unwrap();
        assert_eq!(scraped.status(), StatusCode::OK);
        assert!(
            scraped.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let text = scraped.text().await.unwrap();
        let delivered = value(
            &text,
            "quire_webhook_deliveries_total",
            &[("outcome", "unreachable")],
        );
        if delivered.is_some_and(|n| n >= 1.0) {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no delivery: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let timed = value(&text, "quire_webhook_delivery_duration_seconds_count", &[]);
    assert!(timed.is_some_and(|n| n >= 1.0), "{text}");

    // Requests by matched route and status, never by raw path (the recorder is shared by the
    // servers of this test process, hence "at least").
    let document_route = "/api/v1/sources/{id}/documents/{doc_id}";
    let polled = value(
        &text,
        "quire_http_requests_total",
        &[
            ("method", "GET"),
            ("route", document_route),
            ("status", "200"),
        ],
    );
    assert!(polled.is_some_and(|n| n >= 1.0), "{text}");
    assert!(!text.contains(&doc), "a raw path leaked into a label");
    assert!(
        !text.contains("no-such-thing-4711"),
        "an unmatched path became a label"
    );
    let timed = value(
        &text,
        "quire_http_request_duration_seconds_count",
        &[("route", "/api/v1/sources/{id}/documents/upload")],
    );
    assert!(timed.is_some_and(|n| n >= 1.0), "{text}");
    let le_inf = value(
        &text,
        "quire_http_request_duration_seconds_bucket",
        &[("route", document_route), ("le", "+Inf")],
    );
    assert!(
        le_inf.is_some_and(|n| n >= 1.0),
        "histogram buckets: {text}"
    );
    assert!(
        text.contains("# TYPE quire_http_request_duration_seconds histogram"),
        "{text}"
    );

    // The second search of the key limited to 1 a minute was refused.
    let rejected = value(
        &text,
        "quire_rate_limit_rejections_total",
        &[("bucket", "search")],
    );
    assert!(rejected.is_some_and(|n| n >= 1.0), "{text}");
    let refused = value(
        &text,
        "quire_http_requests_total",
        &[("route", "/api/v1/search"), ("status", "429")],
    );
    assert!(refused.is_some_and(|n| n >= 1.0), "{text}");

    // Documents by status, read from this server's store at the scrape.
    assert_eq!(
        value(&text, "quire_documents", &[("status", "ready")]),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "quire_documents", &[("status", "failed")]),
        Some(0.0)
    );

    // Each stage of the processed document was timed, and its chunk embedded.
    for stage in ["parse", "screen", "embed", "index"] {
        let count = value(
            &text,
            "quire_ingest_stage_duration_seconds_count",
            &[("stage", stage)],
        );
        assert!(count.is_some_and(|n| n >= 1.0), "stage {stage}: {text}");
    }
    let embedded = value(&text, "quire_chunks_embedded_total", &[]);
    assert!(embedded.is_some_and(|n| n >= 1.0), "{text}");

    // The answer took a slot (at once: it waited 0 s); the queue is idle again.
    let waited = value(&text, "quire_generation_queue_wait_seconds_count", &[]);
    assert!(waited.is_some_and(|n| n >= 1.0), "{text}");
    assert_eq!(value(&text, "quire_generation_running", &[]), Some(0.0));
    assert!(value(&text, "quire_generation_slots", &[]).is_some_and(|n| n >= 1.0));
    // The pool has connections and a bound.
    assert_eq!(
        value(&text, "quire_generation_queue_length", &[]),
        Some(0.0)
    );
    let max = value(&text, "quire_db_pool_max_connections", &[]).unwrap();
    let idle = value(&text, "quire_db_pool_connections", &[("state", "idle")]).unwrap();
    let in_use = value(&text, "quire_db_pool_connections", &[("state", "in_use")]).unwrap();
    assert!(
        max >= 1.0 && idle + in_use >= 1.0 && idle + in_use <= max,
        "{text}"
    );
    assert!(
        text.contains("# HELP quire_http_requests_total"),
        "descriptions: {text}"
    );
    server.stop().await;
}
