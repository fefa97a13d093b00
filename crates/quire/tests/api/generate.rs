//! `POST /api/v1/generate` over real HTTP with a real SSE reader (`helpers::sse`): validation
//! before the stream, extractive answers citing the right page, the model path and its failures
//! against a fake OpenAI-compatible chat server (`helpers::fake_llm`), conversations, and the
//! queue.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use quire_core::Permission;
use quire_parse::fixtures::pdf;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::fake_llm::{Fake, Upstream, with_llm};
use crate::helpers::sse::{Sse, next, sse_events};
use crate::helpers::{TestServer, assert_error, source_id};

pub(crate) async fn start_generate(
    server: &TestServer,
    key: &str,
    body: Value,
) -> reqwest::Response {
    server
        .client
        .post(server.url("/api/v1/generate"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The whole stream of a generate call (which must be 200), within 20 s.
async fn generate(server: &TestServer, key: &str, body: Value) -> Vec<Sse> {
    let response = start_generate(server, key, body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut events = sse_events(response);
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(e) = events.recv().await {
            all.push(e);
        }
    })
    .await
    .expect("the stream ends");
    all
}

fn answer_text(events: &[Sse]) -> String {
    events
        .iter()
        .filter(|e| e.event == "delta")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect()
}

fn done(events: &[Sse]) -> &Value {
    let last = events.last().expect("events");
    assert_eq!(last.event, "done", "{events:?}");
    &last.data
}

pub(crate) const PUMP_PAGES: [(&str, Option<&str>); 3] = [
    (
        "Introduction\nThe circulation pump moves cooling water through the plant. It was \
         installed in 2019 and serves both reactors.",
        Some("Introduction"),
    ),
    (
        "Operation\nBefore the pump is started, it must be primed: open the vent valve and fill \
         the casing with water until no air escapes. Starting a dry pump destroys the \
         mechanical seal within seconds.",
        Some("Operation"),
    ),
    (
        "Maintenance\nReplace the mechanical seal every two years. Order seal kits from the \
         regional depot in Leeds.",
        Some("Maintenance"),
    ),
];

async fn server_with_manual(
    adjust: impl FnOnce(&mut quire::Config),
) -> (TestServer, String, String) {
    let server = TestServer::start_with(adjust).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Manuals").await;
    let id = server
        .upload_ok(&key, &source, "pump-manual.pdf", &pdf(&PUMP_PAGES))
        .await;
    server.wait_for_status(&key, &source, &id, "ready").await;
    (server, key, source)
}

#[tokio::test]
async fn the_extractive_answer_quotes_the_right_page_and_says_it_is_extractive() {
    let (server, key, source) = server_with_manual(|_| {}).await;
    let response = start_generate(
        &server,
        &key,
        json!({"query": "How do I prime the pump before starting it?"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["x-accel-buffering"], "no");
    assert!(headers.contains_key("x-ratelimit-limit"));
    let mut rx = sse_events(response);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    let text = answer_text(&events);
    assert!(text.contains("primed"), "{text}");
    let done = done(&events);
    assert_eq!(done["extractive"], true, "{done}");
    let citations = done["citations"].as_array().unwrap();
    assert!(!citations.is_empty(), "{done}");
    let first = &citations[0];
    assert_eq!(first["page"], 2, "{done}");
    assert_eq!(first["section"], "Operation", "{done}");
    assert_eq!(first["documentName"], "pump-manual.pdf");
    assert_eq!(first["dataSourceId"], source);
    assert_eq!(first["dataSourceName"], "Manuals");
    assert!(first["content"].as_str().unwrap().contains("vent valve"));
    assert!(first["score"].as_f64().unwrap() > 0.0);
    let marker = format!("[{}]", first["index"]);
    assert!(text.contains(&marker), "{text} lacks {marker}");
    assert!(
        done["conversationId"]
            .as_str()
            .unwrap()
            .parse::<uuid::Uuid>()
            .is_ok()
    );
    assert!(
        done["messageId"]
            .as_str()
            .unwrap()
            .parse::<uuid::Uuid>()
            .is_ok()
    );
}

#[tokio::test]
async fn with_nothing_to_ground_on_the_answer_says_so() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    server.create_source(&key, "Empty").await;
    let events = generate(
        &server,
        &key,
        json!({"query": "What is the capital of France?"}),
    )
    .await;
    let text = answer_text(&events);
    assert!(text.contains("No passage"), "{text}");
    assert_eq!(done(&events)["citations"], json!([]));
}

#[tokio::test]
async fn bad_requests_are_refused_before_the_stream_with_json_errors() {
    let (server, key, _) = server_with_manual(|_| {}).await;
    let other = server.key(Permission::Read).await;
    let post = |body: Value| start_generate(&server, &key, body);
    assert_error(
        post(json!({"query": ""})).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_error(
        post(json!({"query": "   "})).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    let long = "é".repeat(4001);
    assert_error(
        post(json!({"query": long})).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_error(
        post(json!({})).await,
        StatusCode::BAD_REQUEST,
        "invalid_body",
    )
    .await;
    assert_error(
        post(json!({"query": "q", "sourceIds": [uuid::Uuid::new_v4().to_string()]})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_error(
        post(json!({"query": "q", "conversationId": "nope"})).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert_error(
        post(json!({"query": "q", "conversationId": uuid::Uuid::new_v4().to_string()})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let text_plain = server
        .client
        .post(server.url("/api/v1/generate"))
        .bearer_auth(&key)
        .header("content-type", "text/plain")
        .body(r#"{"query":"q"}"#)
        .send()
        .await
        .unwrap();
    assert_error(
        text_plain,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let anonymous = server
        .client
        .post(server.url("/api/v1/generate"))
        .json(&json!({"query": "q"}))
        .send()
        .await
        .unwrap();
    assert_error(anonymous, StatusCode::UNAUTHORIZED, "unauthorized").await;

    // Exactly 4,000 characters is allowed.
    let events = generate(&server, &key, json!({"query": "pump ".repeat(800)})).await;
    done(&events);

    // A conversation belongs to the key that started it.
    let events = generate(&server, &key, json!({"query": "How is the pump primed?"})).await;
    let conversation = done(&events)["conversationId"].as_str().unwrap().to_owned();
    assert_error(
        start_generate(
            &server,
            &other,
            json!({"query": "and then?", "conversationId": conversation}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_key_scoped_elsewhere_gets_nothing_from_other_sources() {
    let (server, key, source) = server_with_manual(|_| {}).await;
    let elsewhere = server.create_source(&key, "Elsewhere").await;
    let scoped = server
        .key_with(
            Permission::Read,
            quire_core::SourceScope::only([source_id(&elsewhere)]),
            None,
        )
        .await;
    let events = generate(
        &server,
        &scoped,
        json!({"query": "How do I prime the pump?"}),
    )
    .await;
    assert_eq!(done(&events)["citations"], json!([]));
    assert!(!answer_text(&events).contains("vent valve"));
    assert_error(
        start_generate(
            &server,
            &scoped,
            json!({"query": "pump", "sourceIds": [source]}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_model_answer_streams_and_its_markers_become_page_citations() {
    let (fake, url) = Fake::start(
        Upstream::Answer,
        "Open the vent valve and fill the casing with water [2]. Replace the seal every two years [9].",
    )
    .await;
    let (server, key, _) = server_with_manual(with_llm(url)).await;
    let events = generate(&server, &key, json!({"query": "How do I prime the pump?"})).await;
    let deltas = events.iter().filter(|e| e.event == "delta").count();
    assert!(deltas > 5, "the answer streams in pieces: {events:?}");
    let done = done(&events);
    assert_eq!(done["extractive"], false);
    assert!(
        done["generator"].as_str().unwrap().contains("fake-model"),
        "{done}"
    );
    let citations = done["citations"].as_array().unwrap();
    // [9] names no passage: only [2] is cited.
    assert_eq!(citations.len(), 1, "{done}");
    assert_eq!(citations[0]["index"], 2);

    let request = &fake.streaming_requests()[0];
    assert_eq!(request["model"], "fake-model");
    let system = request["messages"][0]["content"].as_str().unwrap();
    // The passage cited as [2] is the one the prompt numbered 2.
    let numbered = system
        .split("\n[2] ")
        .nth(1)
        .expect("passage 2 in the prompt");
    let content = citations[0]["content"].as_str().unwrap();
    assert!(
        numbered.contains(content.split_whitespace().next().unwrap()),
        "{system}"
    );
    assert!(
        system.contains(&format!("page {}", citations[0]["page"])),
        "{system}"
    );
}

#[tokio::test]
async fn upstream_failures_become_error_events_and_nothing_hangs() {
    for (mode, expected) in [
        (Upstream::ServerError, "answered HTTP 500"),
        (Upstream::Garbage, "malformed"),
        (
            Upstream::DiesMidStream,
            "stopped before the answer was complete",
        ),
        (Upstream::Silent, "sent nothing for 2 s"),
    ] {
        let (_fake, url) = Fake::start(mode, "Open the vent valve [1].").await;
        let (server, key, _) = server_with_manual(with_llm(url)).await;
        let started = Instant::now();
        let events = generate(&server, &key, json!({"query": "How do I prime the pump?"})).await;
        let last = events.last().unwrap();
        assert_eq!(last.event, "error", "{mode:?}: {events:?}");
        let message = last.data["message"].as_str().unwrap();
        assert!(message.contains(expected), "{mode:?}: {message}");
        // The model server's address and its own words stay in the log.
        assert!(
            !message.contains("127.0.0.1") && !message.contains("model not loaded"),
            "{mode:?}: {message}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{mode:?} took {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn a_follow_up_is_condensed_with_the_history_and_retrieves_on_topic() {
    let (fake, url) = Fake::start(Upstream::Answer, "Replace it every two years [1].").await;
    let (server, key, _) = server_with_manual(with_llm(url)).await;
    let first = generate(
        &server,
        &key,
        json!({"query": "What does the circulation pump do?"}),
    )
    .await;
    let conversation = done(&first)["conversationId"].as_str().unwrap().to_owned();
    let second = generate(
        &server,
        &key,
        json!({"query": "and how often is its seal replaced?", "conversationId": conversation}),
    )
    .await;
    assert_eq!(done(&second)["conversationId"], conversation.as_str());
    // The second streaming request carries the first exchange before the new question.
    let streamed = fake.streaming_requests();
    let messages = streamed[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(messages[1]["content"], "What does the circulation pump do?");
    assert_eq!(
        messages[3]["content"],
        "and how often is its seal replaced?"
    );
    // A condensing request was made, and retrieval used its standalone question: the
    // maintenance page is among the passages.
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r["stream"] != true)
            .count(),
        1
    );
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains("regional depot"), "{system}");

    // Both exchanges are stored under the conversation.
    let id: quire_core::ConversationId = conversation.parse().unwrap();
    let stored = server.store.recent_messages(id, 10).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].question, "and how often is its seal replaced?");
    assert!(
        stored[1].citations.contains("\"page\""),
        "{}",
        stored[1].citations
    );
}

#[tokio::test]
async fn the_extractive_answerer_follows_a_conversation_too() {
    let (server, key, _) = server_with_manual(|_| {}).await;
    let first = generate(
        &server,
        &key,
        json!({"query": "What does the circulation pump do?"}),
    )
    .await;
    let conversation = done(&first)["conversationId"].as_str().unwrap().to_owned();
    let second = generate(
        &server,
        &key,
        json!({"query": "and where are its seal kits ordered?", "conversationId": conversation}),
    )
    .await;
    let text = answer_text(&second);
    assert!(text.contains("regional depot"), "{text}");
    assert_eq!(done(&second)["citations"][0]["page"], 3);
}

pub(crate) async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn waiting_streams_see_their_place_move_up_in_fifo_order() {
    let (fake, url) = Fake::start(Upstream::Gated, "Open the vent valve [1].").await;
    let (server, key, _) = server_with_manual(|c| {
        with_llm(url)(c);
        c.llm.max_concurrent = 1;
        c.llm.timeout_seconds = 30;
    })
    .await;
    three_questions_are_answered_in_arrival_order(&fake, |n| {
        start_generate(
            &server,
            &key,
            json!({"query": format!("question {n} about the pump")}),
        )
    })
    .await;
}

/// Asks questions 1, 2 and 3 (`ask(n)`, through whichever node) of a gated fake model with one
/// slot: 2 and 3 wait at positions 1 and 2, move up as answers end, reach the model in order,
/// and every stream ends with `done`.
pub(crate) async fn three_questions_are_answered_in_arrival_order<F>(
    fake: &Fake,
    ask: impl Fn(usize) -> F,
) where
    F: Future<Output = reqwest::Response>,
{
    let mut a = sse_events(ask(1).await);
    wait_until("A reaches the model", || {
        fake.streaming_requests().len() == 1
    })
    .await;
    let mut b = sse_events(ask(2).await);
    assert_eq!(next(&mut b).await.data, json!({"position": 1}));
    let mut c = sse_events(ask(3).await);
    assert_eq!(next(&mut c).await.data, json!({"position": 2}));

    fake.release.notify_one();
    assert_eq!(next(&mut a).await.event, "delta");
    // B moves into the slot (no more queued events), C moves up to 1.
    assert_eq!(next(&mut c).await.data, json!({"position": 1}));
    wait_until("B reaches the model", || {
        fake.streaming_requests().len() == 2
    })
    .await;
    fake.release.notify_one();
    assert_eq!(next(&mut b).await.event, "delta");
    wait_until("C reaches the model", || {
        fake.streaming_requests().len() == 3
    })
    .await;
    fake.release.notify_one();
    assert_eq!(next(&mut c).await.event, "delta");
    for events in [&mut a, &mut b, &mut c] {
        let mut last = next(events).await;
        while let Some(e) = events.recv().await {
            last = e;
        }
        assert_eq!(last.event, "done");
    }
    let order: Vec<String> = fake
        .streaming_requests()
        .iter()
        .map(|r| {
            r["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        order,
        [
            "question 1 about the pump",
            "question 2 about the pump",
            "question 3 about the pump"
        ]
    );
}

#[tokio::test]
async fn one_key_cannot_take_the_whole_queue() {
    let (fake, url) = Fake::start(Upstream::Gated, "Open the vent valve [1].").await;
    let (server, busy, _) = server_with_manual(|c| {
        with_llm(url)(c);
        c.llm.max_concurrent = 1;
        c.llm.max_queue = 10;
        c.llm.max_queue_per_key = 2;
        c.llm.timeout_seconds = 30;
    })
    .await;
    let ask = |key: String, n: usize| {
        let server = &server;
        async move {
            start_generate(
                server,
                &key,
                json!({"query": format!("question {n} about the pump")}),
            )
            .await
        }
    };
    let first = ask(busy.clone(), 1).await;
    assert_eq!(first.status(), StatusCode::OK);
    wait_until("the first question reaches the model", || {
        fake.streaming_requests().len() == 1
    })
    .await;
    let mut second = sse_events(ask(busy.clone(), 2).await);
    assert_eq!(next(&mut second).await.data, json!({"position": 1}));
    // The busy key holds its share (one answering, one waiting): its third question is
    // refused although the line has room.
    let refused = ask(busy.clone(), 3).await;
    assert_eq!(refused.headers()["retry-after"], "10");
    let body = assert_error(refused, StatusCode::TOO_MANY_REQUESTS, "queue_full").await;
    assert!(
        body["message"].as_str().unwrap().contains("this key"),
        "{body}"
    );
    // Another key still gets a place in line.
    let other = server.key(Permission::Read).await;
    let mut waiting = sse_events(ask(other, 4).await);
    assert_eq!(next(&mut waiting).await.data, json!({"position": 2}));
    for _ in 0..3 {
        fake.release.notify_one();
    }
    drop(first);
}

#[tokio::test]
async fn a_client_that_leaves_frees_its_slot_and_cancels_the_model() {
    let (fake, url) = Fake::start(Upstream::Gated, "Open the vent valve [1].").await;
    let (server, key, _) = server_with_manual(|c| {
        with_llm(url)(c);
        c.llm.max_concurrent = 1;
        c.llm.max_queue = 1;
        c.llm.timeout_seconds = 30;
        // Far longer than the test: leaving is noticed without a keep-alive write failing.
        c.llm.keep_alive_seconds = 600;
    })
    .await;
    let a = start_generate(
        &server,
        &key,
        json!({"query": "first question about the pump"}),
    )
    .await;
    wait_until("A reaches the model", || {
        fake.streaming_requests().len() == 1
    })
    .await;
    let mut b = sse_events(
        start_generate(
            &server,
            &key,
            json!({"query": "second question about the pump"}),
        )
        .await,
    );
    assert_eq!(next(&mut b).await.data, json!({"position": 1}));
    // The line (one place) is full.
    let refused = start_generate(
        &server,
        &key,
        json!({"query": "third question about the pump"}),
    )
    .await;
    assert_eq!(refused.headers()["retry-after"], "10");
    assert_error(refused, StatusCode::TOO_MANY_REQUESTS, "queue_full").await;

    drop(a);
    wait_until("B reaches the model", || {
        fake.streaming_requests().len() == 2
    })
    .await;
    wait_until("the model sees A leave", || fake.cancelled() == 1).await;
    fake.release.notify_one();
    assert_eq!(next(&mut b).await.event, "delta");
}

#[tokio::test]
async fn generate_has_its_own_rate_limit() {
    let (server, key, _) = server_with_manual(|c| c.limits.generate_per_minute = 2).await;
    for _ in 0..2 {
        done(&generate(&server, &key, json!({"query": "How do I prime the pump?"})).await);
    }
    let limited = start_generate(&server, &key, json!({"query": "again"})).await;
    assert_eq!(limited.headers()["x-ratelimit-remaining"], "0");
    assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // Search counts separately.
    let search = server.search(&key, json!({"query": "pump"})).await;
    assert_eq!(search.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_waiting_client_that_leaves_moves_those_behind_up() {
    let (fake, url) = Fake::start(Upstream::Gated, "Open the vent valve [1].").await;
    let (server, key, _) = server_with_manual(|c| {
        with_llm(url)(c);
        c.llm.max_concurrent = 1;
        c.llm.timeout_seconds = 30;
        c.llm.keep_alive_seconds = 600;
    })
    .await;
    let ask = |n: usize| {
        start_generate(
            &server,
            &key,
            json!({"query": format!("question {n} about the pump")}),
        )
    };
    let mut a = sse_events(ask(1).await);
    wait_until("A reaches the model", || {
        fake.streaming_requests().len() == 1
    })
    .await;
    let b = ask(2).await;
    let mut c = sse_events(ask(3).await);
    assert_eq!(next(&mut c).await.data, json!({"position": 2}));
    drop(b);
    assert_eq!(next(&mut c).await.data, json!({"position": 1}));
    fake.release.notify_one();
    assert_eq!(next(&mut a).await.event, "delta");
    wait_until("C reaches the model", || {
        fake.streaming_requests().len() == 2
    })
    .await;
    fake.release.notify_one();
    assert_eq!(next(&mut c).await.event, "delta");
    let asked: Vec<String> = fake
        .streaming_requests()
        .iter()
        .map(|r| {
            r["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        asked,
        ["question 1 about the pump", "question 3 about the pump"]
    );
}

#[tokio::test]
async fn keep_alive_comments_flow_while_a_stream_waits() {
    let (fake, url) = Fake::start(Upstream::Gated, "Open the vent valve [1].").await;
    let (server, key, _) = server_with_manual(|c| {
        with_llm(url)(c);
        c.llm.max_concurrent = 1;
        c.llm.timeout_seconds = 30;
        c.llm.keep_alive_seconds = 1;
    })
    .await;
    let _a = start_generate(&server, &key, json!({"query": "question 1 about the pump"})).await;
    wait_until("A reaches the model", || {
        fake.streaming_requests().len() == 1
    })
    .await;
    let waiting =
        start_generate(&server, &key, json!({"query": "question 2 about the pump"})).await;
    let mut body = waiting.bytes_stream();
    let mut seen = String::new();
    let started = Instant::now();
    while !seen.lines().any(|l| l.starts_with(':')) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no keep-alive in {seen:?}"
        );
        let bytes = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("bytes within 5 s")
            .expect("the stream is open")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&bytes));
    }
    assert!(
        seen.starts_with("event: queued\ndata: {\"position\":1}"),
        "{seen:?}"
    );
}
