use futures_util::TryStreamExt;
use object_store::{Attributes, PutOptions, PutPayload};

use super::*;

fn spec(url: &str) -> S3Spec {
    S3Spec {
        url: url.into(),
        endpoint: None,
        region: None,
        access_key_id: None,
        secret_access_key: None,
        allow_http: false,
    }
}

fn invalid(spec: &S3Spec) -> String {
    match S3Origin::new(spec, Patterns::all()) {
        Err(SyncError::Invalid(message)) => message,
        Err(other) => panic!("expected Invalid, got {other:?}"),
        Ok(origin) => panic!("expected Invalid, got {origin:?}"),
    }
}

#[test]
fn urls_name_a_bucket_and_an_optional_prefix() {
    let with_prefix =
        S3Origin::new(&spec("s3://my-bucket/docs/reports/"), Patterns::all()).unwrap();
    assert_eq!(with_prefix.bucket, "my-bucket");
    assert_eq!(
        with_prefix.prefix.as_ref().map(Key::as_ref),
        Some("docs/reports")
    );
    for root in ["s3://my-bucket", "s3://my-bucket/"] {
        let origin = S3Origin::new(&spec(root), Patterns::all()).unwrap();
        assert_eq!(origin.prefix, None, "{root}");
    }
}

#[test]
fn bad_urls_are_invalid() {
    for (url, why) in [
        ("https://bucket/prefix", "expected s3://"),
        ("bucket/prefix", "expected s3://"),
        ("s3://", "bucket name"),
        ("s3://ab/x", "bucket name"),
        ("s3://Upper/x", "bucket name"),
        ("s3://bucket_x/x", "bucket name"),
        ("s3://bucket/a//b", "bad prefix"),
        ("s3://bucket/a/../b", "bad prefix"),
        ("s3://bucket/a?versionId=1", "not supported"),
        ("s3://bucket/a%20b", "not supported"),
    ] {
        let message = invalid(&spec(url));
        assert!(message.contains(why), "{url}: {message}");
    }
}

#[test]
fn endpoints_must_be_http_urls_and_plain_http_must_be_allowed() {
    let mut s = spec("s3://bucket/p");
    s.endpoint = Some("http://127.0.0.1:9000".into());
    assert!(invalid(&s).contains("allow_http"));
    s.allow_http = true;
    S3Origin::new(&s, Patterns::all()).unwrap();
    s.endpoint = Some("ftp://storage".into());
    assert!(invalid(&s).contains("expected an http"));
    s.endpoint = Some("https://s3.example.net".into());
    s.allow_http = false;
    S3Origin::new(&s, Patterns::all()).unwrap();
}

#[test]
fn debug_hides_the_secret() {
    let mut s = spec("s3://bucket/p");
    s.access_key_id = Some("AKIAEXAMPLE".into());
    s.secret_access_key = Some("very-secret-value".into());
    let printed = format!("{s:?}");
    assert!(!printed.contains("very-secret-value"), "{printed}");
    assert!(printed.contains("<redacted>"), "{printed}");
    let origin = S3Origin::new(&s, Patterns::all()).unwrap();
    let printed = format!("{origin:?}");
    assert!(!printed.contains("very-secret-value"), "{printed}");
}

#[test]
fn metadata_keys_are_sanitized() {
    assert_eq!(sanitize_key("Author").as_deref(), Some("author"));
    assert_eq!(sanitize_key("doc id+v2").as_deref(), Some("doc_id_v2"));
    assert_eq!(sanitize_key("a.b-c_d").as_deref(), Some("a.b-c_d"));
    assert_eq!(sanitize_key(&"k".repeat(100)).map(|k| k.len()), Some(64));
    assert_eq!(sanitize_key(""), None);
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the S3 tests need a server; run `eval \"$(scripts/s3-server \
             start)\"` first (scripts/test does)"
        )
    })
}

/// An origin on a fresh prefix of the test server's bucket, so runs never see each other.
fn server_origin(patterns: Patterns) -> (S3Origin, String) {
    let prefix = format!("sync-{}", uuid::Uuid::new_v4().simple());
    let spec = S3Spec {
        url: format!("s3://{}/{prefix}/", env("QUIRE_TEST_S3_BUCKET")),
        endpoint: Some(env("QUIRE_TEST_S3_ENDPOINT")),
        region: Some("us-east-1".into()),
        access_key_id: Some(env("QUIRE_TEST_S3_ACCESS_KEY_ID")),
        secret_access_key: Some(env("QUIRE_TEST_S3_SECRET_ACCESS_KEY")),
        allow_http: true,
    };
    (S3Origin::new(&spec, patterns).unwrap(), prefix)
}

async fn put(origin: &S3Origin, key: &str, content: Vec<u8>, metadata: &[(&str, &str)]) {
    let mut attributes = Attributes::new();
    for (name, value) in metadata {
        attributes.insert(
            Attribute::Metadata(name.to_string().into()),
            value.to_string().into(),
        );
    }
    let options = PutOptions {
        attributes,
        ..PutOptions::default()
    };
    origin
        .store
        .put_opts(
            &Key::parse(key).unwrap(),
            PutPayload::from(content),
            options,
        )
        .await
        .unwrap();
}

async fn read_all(origin: &S3Origin, item: &Item) -> Vec<u8> {
    let chunks: Vec<Bytes> = origin
        .open(item)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    chunks.concat()
}

#[tokio::test]
async fn lists_and_reads_objects_of_a_real_server() {
    let patterns = Patterns::new(
        &["**/*.pdf".into(), "**/*.txt".into()],
        &["**/skip/**".into()],
    )
    .unwrap();
    let (origin, prefix) = server_origin(patterns);
    let big: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    put(
        &origin,
        &format!("{prefix}/reports/q1.pdf"),
        big.clone(),
        &[("Author", "Ada"), ("doc-kind", "report")],
    )
    .await;
    put(&origin, &format!("{prefix}/a.txt"), b"alpha".to_vec(), &[]).await;
    put(
        &origin,
        &format!("{prefix}/skip/b.txt"),
        b"skipped".to_vec(),
        &[],
    )
    .await;
    put(
        &origin,
        &format!("{prefix}/image.png"),
        b"png".to_vec(),
        &[],
    )
    .await;
    // Outside the prefix (a sibling whose name starts the same): never listed.
    put(
        &origin,
        &format!("{prefix}-other/c.txt"),
        b"other".to_vec(),
        &[],
    )
    .await;

    let items = origin.list().await.unwrap();
    let ids: Vec<&str> = items.iter().map(|i| i.external_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            format!("{prefix}/a.txt"),
            format!("{prefix}/reports/q1.pdf")
        ]
    );
    let report = &items[1];
    assert_eq!(report.name, "q1.pdf");
    assert_eq!(report.size, big.len() as u64);
    // The listing's ETag, or its size and time when the server lists without ETags (s3s-fs).
    assert!(
        report.fingerprint.starts_with("etag:") || report.fingerprint.starts_with("size:"),
        "{}",
        report.fingerprint
    );
    // The next listing alone tells the objects unchanged: the same fingerprints.
    let previous = items
        .iter()
        .map(|i| (i.external_id.clone(), i.fingerprint.clone()))
        .collect();
    let again = origin.list_since(&previous).await.unwrap();
    assert_eq!(
        again.iter().map(|i| &i.fingerprint).collect::<Vec<_>>(),
        items.iter().map(|i| &i.fingerprint).collect::<Vec<_>>()
    );
    assert!(!report.fingerprint.contains('"'), "{}", report.fingerprint);
    let modified = report.modified.expect("a modification time");
    assert_eq!(
        report.metadata.get("modifiedAt").and_then(|v| v.as_str()),
        Some(
            modified
                .to_rfc3339_opts(SecondsFormat::AutoSi, true)
                .as_str()
        )
    );
    assert_eq!(
        report.metadata.get("author").and_then(|v| v.as_str()),
        Some("Ada"),
        "{:?}",
        report.metadata
    );
    assert_eq!(
        report.metadata.get("doc-kind").and_then(|v| v.as_str()),
        Some("report")
    );
    assert_eq!(items[0].metadata.len(), 1, "{:?}", items[0].metadata);
    assert_eq!(read_all(&origin, report).await, big);
    assert_eq!(read_all(&origin, &items[0]).await, b"alpha");

    // New content: a new fingerprint.
    let before = items[0].fingerprint.clone();
    put(
        &origin,
        &format!("{prefix}/a.txt"),
        b"alpha, changed".to_vec(),
        &[],
    )
    .await;
    let after = origin.list().await.unwrap();
    assert_ne!(after[0].fingerprint, before);

    // Deleted since the listing: the read fails as an origin error.
    origin
        .store
        .delete(&Key::parse(&items[0].external_id).unwrap())
        .await
        .unwrap();
    assert!(matches!(
        origin.open(&items[0]).await,
        Err(SyncError::Origin(_))
    ));
    // A key outside the prefix is refused without asking the server.
    let foreign = Item {
        external_id: format!("{prefix}-other/c.txt"),
        ..items[0].clone()
    };
    assert!(matches!(
        origin.open(&foreign).await,
        Err(SyncError::Origin(_))
    ));
}

#[tokio::test]
async fn a_refused_listing_is_an_origin_error() {
    let spec = S3Spec {
        url: format!("s3://{}/x/", env("QUIRE_TEST_S3_BUCKET")),
        endpoint: Some(env("QUIRE_TEST_S3_ENDPOINT")),
        region: Some("us-east-1".into()),
        access_key_id: Some(env("QUIRE_TEST_S3_ACCESS_KEY_ID")),
        secret_access_key: Some("not-the-secret".into()),
        allow_http: true,
    };
    let wrong = S3Origin::new(&spec, Patterns::all()).unwrap();
    assert!(matches!(wrong.list().await, Err(SyncError::Origin(_))));
}
