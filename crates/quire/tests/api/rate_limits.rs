//! Rate limits with an injected clock: headers on every authenticated response, 429 with
//! `Retry-After`, and a fresh window after the minute turns.

use chrono::Duration;
use quire_core::{Permission, SourceScope};
use reqwest::{Response, StatusCode};
use serde_json::json;

use crate::helpers::{TestServer, assert_error, start_time};

fn header(response: &Response, name: &str) -> i64 {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn search_is_limited_per_key_per_minute() {
    let server = TestServer::start().await;
    let key = server
        .key_with(Permission::Read, SourceScope::All, Some(3))
        .await;
    let other = server.key(Permission::Read).await;
    // The test clock stands at hh:mm:05, so the window resets 55 s later.
    let reset = (start_time().timestamp() / 60 + 1) * 60;

    for remaining in [2, 1, 0] {
        let response = server.search(&key, json!({"query": "x"})).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, "x-ratelimit-limit"), 3);
        assert_eq!(header(&response, "x-ratelimit-remaining"), remaining);
        assert_eq!(header(&response, "x-ratelimit-reset"), reset);
    }
    let limited = server.search(&key, json!({"query": "x"})).await;
    assert_eq!(header(&limited, "retry-after"), 55);
    assert_eq!(header(&limited, "x-ratelimit-remaining"), 0);
    assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;

    // Other endpoints are not limited but still report the key's standing.
    let listing = server.get(&key, "/api/v1/sources").await;
    assert_eq!(listing.status(), StatusCode::OK);
    assert_eq!(header(&listing, "x-ratelimit-limit"), 3);
    assert_eq!(header(&listing, "x-ratelimit-remaining"), 0);

    // Another key has its own window and the default limit.
    let fresh = server.search(&other, json!({"query": "x"})).await;
    assert_eq!(header(&fresh, "x-ratelimit-limit"), 100);
    assert_eq!(header(&fresh, "x-ratelimit-remaining"), 99);

    server.clock.advance(Duration::seconds(55));
    let next_window = server.search(&key, json!({"query": "x"})).await;
    assert_eq!(next_window.status(), StatusCode::OK);
    assert_eq!(header(&next_window, "x-ratelimit-remaining"), 2);
    assert_eq!(header(&next_window, "x-ratelimit-reset"), reset + 60);
}

#[tokio::test]
async fn every_authenticated_response_carries_the_headers() {
    let server = TestServer::start_with(|c| c.limits.search_per_minute = 7).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "S").await;
    let responses = [
        server.get(&key, "/api/v1/sources").await,
        server.get(&key, &format!("/api/v1/sources/{source}")).await,
        server
            .get(&key, &format!("/api/v1/sources/{}", uuid::Uuid::new_v4()))
            .await,
        server
            .post_json(&key, "/api/v1/sources", &json!({"bad": true}))
            .await,
        server.upload(&key, &source, "a.txt", b"a").await,
    ];
    for response in responses {
        assert_eq!(
            header(&response, "x-ratelimit-limit"),
            7,
            "{}",
            response.url()
        );
        assert!(header(&response, "x-ratelimit-reset") > start_time().timestamp());
    }
}
