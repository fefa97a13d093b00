//! Listing a source's documents page by page (`limit`, `cursor`, the `Link` header) and
//! downloading a document's original.

use quire_core::{Permission, SourceScope};
use reqwest::StatusCode;

use crate::helpers::{TestServer, assert_error, body};

/// The path of the `Link` header's next page, if the response has one.
fn next_page(response: &reqwest::Response) -> Option<String> {
    let link = response.headers().get("link")?.to_str().unwrap().to_owned();
    let target = link
        .strip_prefix('<')
        .and_then(|rest| rest.split_once(">; rel=\"next\""))
        .map(|(target, _)| target.to_owned());
    assert!(target.is_some(), "malformed Link header: {link}");
    target
}

#[tokio::test]
async fn documents_are_listed_page_by_page_following_the_link_header() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Paged").await;
    for i in 0..7 {
        server
            .upload_ok(
                &key,
                &source,
                &format!("note-{i}.txt"),
                format!("note {i}").as_bytes(),
            )
            .await;
    }
    let whole = server.documents(&key, &source).await;
    let whole: Vec<_> = whole
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(whole.len(), 7);

    // Without `limit` the answer is as it always was: every document, no Link header.
    let plain = server
        .get(&key, &format!("/api/v1/sources/{source}/documents"))
        .await;
    assert!(plain.headers().get("link").is_none());

    let mut paged = Vec::new();
    let mut path = format!("/api/v1/sources/{source}/documents?limit=3");
    let mut pages = 0;
    loop {
        let response = server.get(&key, &path).await;
        assert_eq!(response.status(), StatusCode::OK);
        let next = next_page(&response);
        let page = body(response).await;
        let page = page.as_array().unwrap();
        assert!(page.len() <= 3);
        paged.extend(page.iter().map(|d| d["id"].clone()));
        pages += 1;
        match next {
            Some(next) => path = next,
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        paged, whole,
        "the pages join into the whole list, in its order"
    );

    // The source's own detail pages its documents the same way.
    let response = server
        .get(&key, &format!("/api/v1/sources/{source}?limit=5"))
        .await;
    let next = next_page(&response).expect("two more documents follow");
    assert!(next.starts_with(&format!("/api/v1/sources/{source}?limit=5&cursor=")));
    let first = body(response).await;
    assert_eq!(first["documents"].as_array().unwrap().len(), 5);
    assert_eq!(first["name"], "Paged");
    let rest = body(server.get(&key, &next).await).await;
    assert_eq!(rest["documents"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn malformed_page_requests_are_400_and_scope_still_holds() {
    let server = TestServer::start_with(|c| c.workers.count = 0).await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "A").await;
    let other = server.create_source(&key, "B").await;
    let list = format!("/api/v1/sources/{source}/documents");
    for query in [
        "?limit=0",
        "?limit=1001",
        "?limit=ten",
        "?cursor=d1.1.1",
        "?limit=2&cursor=nonsense",
        "?limit=2&cursor=d1.x.1",
    ] {
        assert_error(
            server.get(&key, &format!("{list}{query}")).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        )
        .await;
    }
    let scoped = server
        .key_with(
            Permission::Read,
            SourceScope::only([other.parse().unwrap()]),
            None,
        )
        .await;
    assert_error(
        server.get(&scoped, &format!("{list}?limit=2")).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn the_original_is_downloaded_with_its_type_and_name_within_scope_only() {
    let server = TestServer::start().await;
    let key = server.key(Permission::ReadWrite).await;
    let source = server.create_source(&key, "Files").await;
    let other = server.create_source(&key, "Other").await;
    let bytes = b"# R\xc3\xa9sum\xc3\xa9\n\nThe original bytes, exactly.\n";
    let doc = server
        .upload_ok(&key, &source, "Résumé \"v2\".md", bytes)
        .await;

    let ready = server.wait_for_status(&key, &source, &doc, "ready").await;

    let path = format!("/api/v1/sources/{source}/documents/{doc}/original");
    let response = server.get(&key, &path).await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(
        headers["content-type"],
        ready["contentType"].as_str().unwrap()
    );
    assert_eq!(headers["content-length"], bytes.len().to_string().as_str());
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let disposition = headers["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment; "), "{disposition}");
    assert!(
        disposition.contains("filename*=UTF-8''R%C3%A9sum%C3%A9"),
        "{disposition}"
    );
    assert_eq!(response.bytes().await.unwrap().as_ref(), bytes);

    // A read key of another source, a document of another source, a missing document: 404.
    let scoped = server
        .key_with(
            Permission::Read,
            SourceScope::only([other.parse().unwrap()]),
            None,
        )
        .await;
    assert_error(
        server.get(&scoped, &path).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_error(
        server
            .get(
                &key,
                &format!("/api/v1/sources/{other}/documents/{doc}/original"),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let deleted = server
        .delete(&key, &format!("/api/v1/sources/{source}/documents/{doc}"))
        .await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_error(
        server.get(&key, &path).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}
