//! Webhooks over real HTTP: registration (admin only, validation, the SSRF guard), deliveries
//! to a receiver on loopback that verifies each Standard Webhooks signature with its own HMAC
//! (`helpers::webhook_receiver`), exact payloads, a receiver too slow to answer, delivery
//! across a restart (once; again with the same `webhook-id` when the stopped server had claimed
//! the event without logging an attempt), and a shutdown that waits for the deliveries in
//! flight.

use std::time::{Duration, Instant};

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::webhook_receiver::Receiver;
use crate::helpers::{TestServer, assert_error, body};

async fn register(server: &TestServer, key: &str, url: &str, events: Value) -> reqwest::Response {
    server
        .post_json(
            key,
            "/api/v1/webhooks",
            &json!({"url": url, "events": events}),
        )
        .await
}

fn allowing_private(c: &mut quire::Config) {
    c.webhooks.allow_private_targets = true;
}

#[tokio::test]
async fn registration_is_for_admins_and_validates_url_and_events() {
    let server = TestServer::start_with(allowing_private).await;
    let admin = server.key(Permission::Admin).await;
    let writer = server.key(Permission::ReadWrite).await;
    let url = "http://127.0.0.1:9/hook";
    assert_error(
        register(&server, &writer, url, json!(["document.ready"])).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert_error(
        server.get(&writer, "/api/v1/webhooks").await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    for (bad_url, events) in [
        ("ftp://example.com/x", json!(["document.ready"])),
        ("not a url", json!(["document.ready"])),
        ("/relative", json!(["document.ready"])),
        (url, json!([])),
        (url, json!(["document.created"])),
    ] {
        let response = register(&server, &admin, bad_url, events.clone()).await;
        let error = assert_error(response, StatusCode::BAD_REQUEST, "bad_request").await;
        assert!(
            !error["message"].as_str().unwrap().is_empty(),
            "{bad_url} {events}"
        );
    }
    let created = register(
        &server,
        &admin,
        url,
        json!(["document.ready", "document.failed", "document.ready"]),
    )
    .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let location = created.headers()["location"].to_str().unwrap().to_owned();
    let created = body(created).await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("/api/v1/webhooks/{id}"));
    assert_eq!(created["url"], url);
    assert_eq!(
        created["events"],
        json!(["document.ready", "document.failed"])
    );
    assert!(created["secret"].as_str().unwrap().starts_with("whsec_"));
    assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));

    let listed = body(server.get(&admin, "/api/v1/webhooks").await).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("secret").is_none(), "{listed}");
    let one = body(server.get(&admin, &location).await).await;
    assert!(one.get("secret").is_none(), "{one}");

    let deleted = server.delete(&admin, &location).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_error(
        server.delete(&admin, &location).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn internal_targets_are_refused_unless_allowed() {
    let server = TestServer::start().await;
    let admin = server.key(Permission::Admin).await;
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8080/hook",
        "http://localhost:8080/hook",
        "http://192.168.0.10/hook",
    ] {
        let error = assert_error(
            register(&server, &admin, url, json!(["document.ready"])).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("allow_private_targets"),
            "{url}: {error}"
        );
    }
    let allowed = TestServer::start_with(allowing_private).await;
    let admin = allowed.key(Permission::Admin).await;
    let response = register(
        &allowed,
        &admin,
        "http://localhost:8080/hook",
        json!(["document.ready"]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn ready_and_failed_documents_are_announced_with_exact_signed_payloads() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(allowing_private).await;
    let admin = server.key(Permission::Admin).await;
    let created = body(
        register(
            &server,
            &admin,
            &url,
            json!(["document.ready", "document.failed"]),
        )
        .await,
    )
    .await;
    *receiver.secret.lock().unwrap() = created["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "Manuals").await;
    let ready = server
        .upload_ok(
            &admin,
            &source,
            "pump.md",
            b"# Pump\nPrime the pump before starting it.",
        )
        .await;
    server
        .wait_for_status(&admin, &source, &ready, "ready")
        .await;
    let failed = server
        .upload_ok(&admin, &source, "broken.pdf", b"%PDF-1.7 truncated")
        .await;
    server
        .wait_for_status(&admin, &source, &failed, "failed")
        .await;
    wait_for("two deliveries", Duration::from_secs(10), || {
        receiver.received().len() == 2
    })
    .await;
    assert_eq!(receiver.bad_signatures(), 0);

    let received = receiver.received();
    let by_event = |name: &str| {
        received
            .iter()
            .find(|(_, b)| b["event"] == name)
            .unwrap()
            .1
            .clone()
    };
    let ready_event = by_event("document.ready");
    let doc = body(
        server
            .get(
                &admin,
                &format!("/api/v1/sources/{source}/documents/{ready}"),
            )
            .await,
    )
    .await;
    assert_eq!(
        ready_event["data"],
        json!({
            "documentId": ready,
            "documentName": "pump.md",
            "dataSourceId": source,
            "dataSourceName": "Manuals",
            "chunkCount": doc["chunkCount"],
            "version": 1,
        })
    );
    assert_eq!(ready_event.as_object().unwrap().len(), 3, "{ready_event}");
    assert!(ready_event["timestamp"].as_str().unwrap().ends_with('Z'));
    let failed_event = by_event("document.failed");
    let failed_doc = body(
        server
            .get(
                &admin,
                &format!("/api/v1/sources/{source}/documents/{failed}"),
            )
            .await,
    )
    .await;
    assert_eq!(
        failed_event["data"],
        json!({
            "documentId": failed,
            "documentName": "broken.pdf",
            "dataSourceId": source,
            "dataSourceName": "Manuals",
            "error": failed_doc["error"],
            "version": 1,
        })
    );
    // Distinct delivery ids.
    assert_ne!(received[0].0, received[1].0);

    // The delivery log shows both, as successes (each is logged once its answer is in, so
    // a moment after the receiver has it).
    let id = created["id"].as_str().unwrap();
    let started = Instant::now();
    let log = loop {
        let log = body(
            server
                .get(&admin, &format!("/api/v1/webhooks/{id}/deliveries"))
                .await,
        )
        .await;
        if log.as_array().unwrap().len() >= 2 || started.elapsed() > Duration::from_secs(10) {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log.iter()
            .all(|a| a["statusCode"] == 204 && a["success"] == true),
        "{log:?}"
    );
}

#[tokio::test]
async fn a_receiver_too_slow_to_answer_is_logged_as_failed_and_holds_nothing_up() {
    let (slow, slow_url) = Receiver::start(Duration::from_secs(30)).await;
    let (fast, fast_url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(|c| {
        allowing_private(c);
        c.webhooks.timeout_seconds = 1;
    })
    .await;
    let admin = server.key(Permission::Admin).await;
    let slow_hook =
        body(register(&server, &admin, &slow_url, json!(["document.ready"])).await).await;
    *slow.secret.lock().unwrap() = slow_hook["secret"].as_str().unwrap().to_owned();
    let fast_hook =
        body(register(&server, &admin, &fast_url, json!(["document.ready"])).await).await;
    *fast.secret.lock().unwrap() = fast_hook["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "S").await;
    let started = Instant::now();
    for i in 0..3 {
        let id = server
            .upload_ok(
                &admin,
                &source,
                &format!("{i}.md"),
                format!("# Doc {i}\ntext {i}").as_bytes(),
            )
            .await;
        server.wait_for_status(&admin, &source, &id, "ready").await;
    }
    // Processing did not wait for the slow receiver, and the fast one got all three at once.
    wait_for("the fast receiver", Duration::from_secs(5), || {
        fast.received().len() == 3
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let id = slow_hook["id"].as_str().unwrap();
    let path = format!("/api/v1/webhooks/{id}/deliveries");
    let started = Instant::now();
    let log = loop {
        let log = body(server.get(&admin, &path).await).await;
        if log.as_array().unwrap().len() == 3 {
            break log;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "three failed attempts: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for attempt in log.as_array().unwrap() {
        assert_eq!(attempt["success"], false, "{attempt}");
        assert!(
            attempt["error"].as_str().unwrap().contains("timed out"),
            "{attempt}"
        );
        assert!(attempt["latencyMs"].as_u64().unwrap() >= 900, "{attempt}");
    }
}

#[tokio::test]
async fn an_event_written_before_a_restart_is_delivered_once_after_it() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(allowing_private).await;
    let admin = server.key(Permission::Admin).await;
    let hook = body(register(&server, &admin, &url, json!(["document.pii_detected"])).await).await;
    *receiver.secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "S").await;
    let doc = server
        .upload_ok(&admin, &source, "cv.md", b"# CV\nJane Doe")
        .await;
    server.wait_for_status(&admin, &source, &doc, "ready").await;
    let (data_dir, clock) = server.stop().await;

    // While the service is down, a status change writes its event to the outbox.
    let store = quire::open_store(&crate::helpers::test_config(data_dir.path()))
        .await
        .unwrap();
    let written = store
        .enqueue_event(
            doc.parse().unwrap(),
            quire_core::WebhookEvent::DocumentPiiDetected,
            json!({"piiTypes": ["person_name"]}),
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!(written, 1);
    drop(store);

    let server = TestServer::start_in(data_dir, clock, allowing_private).await;
    wait_for("the delivery", Duration::from_secs(10), || {
        receiver.received().len() == 1
    })
    .await;
    let (_, event) = &receiver.received()[0];
    assert_eq!(event["event"], "document.pii_detected");
    assert_eq!(event["data"]["piiTypes"], json!(["person_name"]));
    assert_eq!(event["data"]["documentName"], "cv.md");

    // Another restart does not send it again: once the restarted server has nothing left to
    // deliver, the receiver still has the one delivery.
    let (data_dir, clock) = server.stop().await;
    let server = TestServer::start_in(data_dir, clock, allowing_private).await;
    server.drain().await;
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn an_event_claimed_by_a_server_that_stopped_before_attempting_it_is_sent_after_restart() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let server = TestServer::start_with(allowing_private).await;
    let admin = server.key(Permission::Admin).await;
    let hook = body(register(&server, &admin, &url, json!(["document.pii_detected"])).await).await;
    *receiver.secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "S").await;
    let doc = server
        .upload_ok(&admin, &source, "cv.md", b"# CV\nJane Doe")
        .await;
    server.wait_for_status(&admin, &source, &doc, "ready").await;
    let (data_dir, clock) = server.stop().await;

    // The event is written and claimed by this node's dispatcher, whose process then dies: no
    // attempt was logged, and its claim would hold for an hour.
    let node = std::fs::read_to_string(data_dir.path().join("node-id")).unwrap();
    let config = crate::helpers::test_config(data_dir.path());
    let store = quire::open_store(&config).await.unwrap();
    store
        .enqueue_event(
            doc.parse().unwrap(),
            quire_core::WebhookEvent::DocumentPiiDetected,
            json!({"piiTypes": ["person_name"]}),
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let now = quire_core::Clock::now(clock.as_ref());
    let claimed = store
        .claim_deliveries(
            &format!("{node}:dispatcher-dead"),
            now,
            now + chrono::Duration::hours(1),
            10,
        )
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    store.close().await;

    // The restarted node knows the claim was its own previous run's (on SQLite it owns every
    // claim), so the claim is released and the event is sent, with the id it was claimed with.
    let server = TestServer::start_in(data_dir, clock, allowing_private).await;
    wait_for("the delivery", Duration::from_secs(10), || {
        receiver.received().len() == 1
    })
    .await;
    let (id, event) = &receiver.received()[0];
    assert_eq!(id, &claimed[0].event_id.to_string(), "the same webhook-id");
    assert_eq!(event["data"]["piiTypes"], json!(["person_name"]));
    let hook_id = hook["id"].as_str().unwrap();
    let path = format!("/api/v1/webhooks/{hook_id}/deliveries");
    let started = Instant::now();
    while body(server.get(&admin, &path).await)
        .await
        .as_array()
        .unwrap()
        .len()
        != 1
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the attempt is logged"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (data_dir, _) = server.stop().await;
    let store = quire::open_store(&crate::helpers::test_config(data_dir.path()))
        .await
        .unwrap();
    let far = chrono::Utc::now() + chrono::Duration::days(365);
    assert_eq!(store.pending_deliveries_count(far).await.unwrap(), 0);
    assert_eq!(receiver.received().len(), 1, "sent once");
}

#[tokio::test]
async fn a_normal_shutdown_waits_for_the_deliveries_in_flight() {
    let (receiver, url) = Receiver::start(Duration::from_millis(1500)).await;
    let server = TestServer::start_with(allowing_private).await;
    let admin = server.key(Permission::Admin).await;
    let hook = body(register(&server, &admin, &url, json!(["document.ready"])).await).await;
    *receiver.secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
    let source = server.create_source(&admin, "S").await;
    let doc = server
        .upload_ok(&admin, &source, "pump.md", b"# Pump\nPrime it first.")
        .await;
    server.wait_for_status(&admin, &source, &doc, "ready").await;
    wait_for("the request to arrive", Duration::from_secs(10), || {
        receiver.arrived() == 1
    })
    .await;
    assert!(receiver.received().is_empty(), "still being answered");

    let (data_dir, _) = server.stop().await;
    assert_eq!(
        receiver.received().len(),
        1,
        "the stop waited for the answer"
    );
    let store = quire::open_store(&crate::helpers::test_config(data_dir.path()))
        .await
        .unwrap();
    let log = store
        .deliveries(hook["id"].as_str().unwrap().parse().unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].status_code, Some(204));
    let far = chrono::Utc::now() + chrono::Duration::days(365);
    assert_eq!(
        store.pending_deliveries_count(far).await.unwrap(),
        0,
        "nothing to send again at the next start"
    );
}

/// A webhook carries the scope of the key that registered it: an admin key limited to source A
/// registers webhooks that hear only A's documents, sees and deletes only webhooks within A,
/// and cannot narrow a webhook to a source outside its scope.
#[tokio::test]
async fn a_scoped_admin_key_registers_and_sees_only_webhooks_of_its_sources() {
    let server = TestServer::start_with(allowing_private).await;
    let root = server.key(Permission::Admin).await;
    let a = server.create_source(&root, "A").await;
    let b = server.create_source(&root, "B").await;
    let a_id: quire_core::SourceId = a.parse().unwrap();
    let admin_a = server
        .key_with(Permission::Admin, SourceScope::only([a_id]), None)
        .await;

    let (hears_a, url_a) = Receiver::start(Duration::ZERO).await;
    let created = register(&server, &admin_a, &url_a, json!(["document.ready"])).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let scoped = body(created).await;
    assert_eq!(scoped["sourceIds"], json!([a]));
    *hears_a.secret.lock().unwrap() = scoped["secret"].as_str().unwrap().to_owned();

    let (hears_all, url_all) = Receiver::start(Duration::ZERO).await;
    let everywhere =
        body(register(&server, &root, &url_all, json!(["document.ready"])).await).await;
    assert_eq!(everywhere["sourceIds"], Value::Null);
    *hears_all.secret.lock().unwrap() = everywhere["secret"].as_str().unwrap().to_owned();
    let only_b = body(
        server
            .post_json(
                &root,
                "/api/v1/webhooks",
                &json!({"url": url_all, "events": ["document.failed"], "sourceIds": [b]}),
            )
            .await,
    )
    .await;
    assert_eq!(only_b["sourceIds"], json!([b]));

    // The scoped key lists only its webhook; the others are not found, as if absent.
    let listed = body(server.get(&admin_a, "/api/v1/webhooks").await).await;
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [scoped["id"].as_str().unwrap()]);
    assert_eq!(
        body(server.get(&root, "/api/v1/webhooks").await)
            .await
            .as_array()
            .unwrap()
            .len(),
        3
    );
    for other in [&everywhere, &only_b] {
        let id = other["id"].as_str().unwrap();
        for path in [
            format!("/api/v1/webhooks/{id}"),
            format!("/api/v1/webhooks/{id}/deliveries"),
        ] {
            assert_error(
                server.get(&admin_a, &path).await,
                StatusCode::NOT_FOUND,
                "not_found",
            )
            .await;
        }
        assert_error(
            server
                .delete(&admin_a, &format!("/api/v1/webhooks/{id}"))
                .await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
    }
    // Narrowing to a source outside the key's scope is refused like an unknown source.
    let outside = server
        .post_json(
            &admin_a,
            "/api/v1/webhooks",
            &json!({"url": url_a, "events": ["document.ready"], "sourceIds": [b]}),
        )
        .await;
    assert_error(outside, StatusCode::NOT_FOUND, "not_found").await;

    // A's document reaches both receivers, B's only the unscoped one.
    let in_b = server
        .upload_ok(&root, &b, "b.md", b"# B\nBravo text.")
        .await;
    server.wait_for_status(&root, &b, &in_b, "ready").await;
    let in_a = server
        .upload_ok(&root, &a, "a.md", b"# A\nAlpha text.")
        .await;
    server.wait_for_status(&root, &a, &in_a, "ready").await;
    // Once every event has been delivered, the unscoped receiver has both and A's only A's.
    server.drain().await;
    assert_eq!(
        hears_all.received().len(),
        2,
        "both events at the unscoped receiver"
    );
    let heard: Vec<Value> = hears_a
        .received()
        .into_iter()
        .map(|(_, b)| b["data"]["documentId"].clone())
        .collect();
    assert_eq!(heard, [json!(in_a)], "B's event never reaches A's webhook");
    assert_eq!(hears_a.bad_signatures(), 0);
}

#[tokio::test]
async fn a_sync_run_is_announced_with_its_counts_once_it_ends() {
    let (receiver, url) = Receiver::start(Duration::ZERO).await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("pumps.md"), "# Pumps\n\nPrime the pump.\n").unwrap();
    std::fs::write(root.path().join("valves.md"), "# Valves\n\nOpen fully.\n").unwrap();
    let roots = vec![root.path().to_path_buf()];
    let server = TestServer::start_with(move |c| {
        allowing_private(c);
        c.connectors.folder_roots = roots;
    })
    .await;
    let admin = server.key(Permission::Admin).await;
    let created = body(register(&server, &admin, &url, json!(["source.synced"])).await).await;
    *receiver.secret.lock().unwrap() = created["secret"].as_str().unwrap().to_owned();
    let response = server
        .post_json(
            &admin,
            "/api/v1/sources",
            &json!({"name": "Handbook", "type": "folder",
                "sync": {"path": root.path(), "intervalSeconds": 0}}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let source = body(response).await["id"].as_str().unwrap().to_owned();

    wait_for("the first run's event", Duration::from_secs(30), || {
        receiver.received().len() == 1
    })
    .await;
    assert_eq!(receiver.bad_signatures(), 0);
    let event = receiver.received()[0].1.clone();
    let runs = body(
        server
            .get(&admin, &format!("/api/v1/sources/{source}/syncs"))
            .await,
    )
    .await;
    assert_eq!(event["event"], "source.synced", "{event}");
    assert_eq!(event["data"]["dataSourceId"], source.as_str(), "{event}");
    assert_eq!(event["data"]["dataSourceName"], "Handbook", "{event}");
    // The run exactly as the API lists it.
    assert_eq!(event["data"]["run"], runs[0], "{event}");
    assert_eq!(event["data"]["run"]["status"], "succeeded", "{event}");
    assert_eq!(event["data"]["run"]["added"], 2, "{event}");

    // A second run, on demand, is announced too: nothing changed.
    let started = server
        .post_json(
            &admin,
            &format!("/api/v1/sources/{source}/sync"),
            &json!({}),
        )
        .await;
    assert_eq!(started.status(), StatusCode::ACCEPTED);
    wait_for("the second run's event", Duration::from_secs(30), || {
        receiver.received().len() == 2
    })
    .await;
    let second = receiver.received()[1].1.clone();
    assert_eq!(second["data"]["run"]["unchanged"], 2, "{second}");
    assert_ne!(second["data"]["run"]["id"], event["data"]["run"]["id"]);
}
