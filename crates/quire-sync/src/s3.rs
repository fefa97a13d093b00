//! A prefix of an S3-compatible bucket as an origin, through the `object_store` crate (the
//! client configuration mirrors crates/quire-files' `S3Files`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::SecondsFormat;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{
    Attribute, BackoffConfig, ClientOptions, GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt,
    RetryConfig,
};

use crate::{Item, MODIFIED_AT, Origin, Patterns, SyncError, size_mtime_fingerprint};

/// HEAD requests in flight at once while listing (one per object, for its user metadata).
const HEADS_IN_FLIGHT: usize = 8;
/// Longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest one request may take (a download's response to start and stream).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Retries of a failed request (transport errors, 5xx) before the origin is reported failing.
const MAX_RETRIES: usize = 3;
/// Longest metadata key kept (longer ones are cut).
const METADATA_KEY_CHARS: usize = 64;

/// How to reach an S3-compatible bucket prefix. `Debug` shows only whether the secret is set.
#[derive(Clone)]
pub struct S3Spec {
    /// "s3://bucket/prefix/" (the prefix is optional).
    pub url: String,
    /// The service's base URL (`https://s3.example.net`); `None` for AWS itself, by region.
    pub endpoint: Option<String>,
    /// The region requests are signed for (`us-east-1` when `None`).
    pub region: Option<String>,
    /// Access key id; when it and the secret are `None`, ambient credentials are used.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Allows a plain `http://` endpoint.
    pub allow_http: bool,
}

impl std::fmt::Debug for S3Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Spec")
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// An S3-compatible bucket prefix.
pub struct S3Origin {
    store: Arc<AmazonS3>,
    bucket: String,
    prefix: Option<Key>,
    patterns: Patterns,
}

/// Names the bucket and prefix only: the client's configuration holds the credentials.
impl std::fmt::Debug for S3Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Origin")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix.as_ref().map(Key::as_ref))
            .finish_non_exhaustive()
    }
}

impl S3Origin {
    /// Validates the URL (scheme `s3`, a bucket) and builds the client; a bad spec is
    /// [`SyncError::Invalid`]. Does not contact the server.
    pub fn new(spec: &S3Spec, patterns: Patterns) -> Result<Self, SyncError> {
        let (bucket, prefix) = parse_url(&spec.url)?;
        if let Some(endpoint) = &spec.endpoint {
            check_endpoint(endpoint, spec.allow_http)?;
        }
        let client = ClientOptions::new()
            .with_allow_http(spec.allow_http)
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT);
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            // Bounds the retries of one call: an outage fails the run, it is not waited out.
            retry_timeout: REQUEST_TIMEOUT,
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&bucket)
            .with_region(spec.region.as_deref().unwrap_or("us-east-1"))
            .with_allow_http(spec.allow_http)
            .with_client_options(client)
            .with_retry(retry);
        if let Some(endpoint) = &spec.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(id) = &spec.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &spec.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        let store = builder
            .build()
            .map_err(|e| SyncError::Invalid(format!("S3 source {}: {e}", spec.url)))?;
        Ok(Self {
            store: Arc::new(store),
            bucket,
            prefix,
            patterns,
        })
    }

    /// The item of one listed object, with the user metadata a HEAD request returns; `None`
    /// when the object was deleted since the listing.
    async fn item(&self, meta: ObjectMeta) -> Result<Option<Item>, SyncError> {
        let options = GetOptions {
            head: true,
            ..GetOptions::default()
        };
        let head = match self.store.get_opts(&meta.location, options).await {
            Ok(head) => head,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(origin_error(&e)),
        };
        let mut metadata = serde_json::Map::new();
        for (attribute, value) in &head.attributes {
            if let Attribute::Metadata(key) = attribute
                && let Some(key) = sanitize_key(key)
            {
                metadata.insert(key, value.as_ref().into());
            }
        }
        Ok(Some(item_of(meta, metadata)))
    }

    /// The objects under the prefix that the patterns take.
    async fn listed(&self) -> Result<Vec<ObjectMeta>, SyncError> {
        self.store
            .list(self.prefix.as_ref())
            .map_err(|e| origin_error(&e))
            .try_filter(|meta| std::future::ready(self.patterns.takes(meta.location.as_ref())))
            .try_collect()
            .await
    }
}

/// The fingerprint of a listed object: its ETag, else (servers that list without ETags) its
/// size and modification time. Always the listing's, never a HEAD's, so that the next listing
/// alone tells an unchanged object.
fn fingerprint(meta: &ObjectMeta) -> String {
    match &meta.e_tag {
        Some(etag) => format!("etag:{}", etag.trim_matches('"')),
        None => size_mtime_fingerprint(meta.size, Some(meta.last_modified)),
    }
}

/// The item of object `meta` with its user `metadata` (and its modification time added).
fn item_of(meta: ObjectMeta, mut metadata: serde_json::Map<String, serde_json::Value>) -> Item {
    metadata.insert(
        MODIFIED_AT.to_owned(),
        meta.last_modified
            .to_rfc3339_opts(SecondsFormat::AutoSi, true)
            .into(),
    );
    let external_id = meta.location.as_ref().to_owned();
    let name = meta.location.filename().unwrap_or(&external_id).to_owned();
    Item {
        fingerprint: fingerprint(&meta),
        name,
        size: meta.size,
        modified: Some(meta.last_modified),
        metadata,
        external_id,
    }
}

#[async_trait]
impl Origin for S3Origin {
    async fn list(&self) -> Result<Vec<Item>, SyncError> {
        self.list_since(&HashMap::new()).await
    }

    /// Only new and changed objects cost a HEAD (for their user metadata): an object the
    /// listing shows with the fingerprint it had is unchanged and is not asked about again.
    async fn list_since(&self, previous: &HashMap<String, String>) -> Result<Vec<Item>, SyncError> {
        let listed = self.listed().await?;
        let mut items: Vec<Item> = futures_util::stream::iter(listed)
            .map(|meta| async move {
                let known = previous.get(meta.location.as_ref());
                if known == Some(&fingerprint(&meta)) {
                    Ok(Some(item_of(meta, serde_json::Map::new())))
                } else {
                    self.item(meta).await
                }
            })
            .buffered(HEADS_IN_FLIGHT)
            .try_filter_map(|item| std::future::ready(Ok(item)))
            .try_collect()
            .await?;
        items.sort_by(|a, b| a.external_id.cmp(&b.external_id));
        Ok(items)
    }

    async fn open(
        &self,
        item: &Item,
    ) -> Result<BoxStream<'static, Result<Bytes, SyncError>>, SyncError> {
        let key = Key::parse(&item.external_id)
            .ok()
            .filter(|key| self.prefix.as_ref().is_none_or(|p| key.prefix_matches(p)))
            .ok_or_else(|| {
                SyncError::Origin(format!(
                    "{:?} is not an object under this source's prefix",
                    item.external_id
                ))
            })?;
        let object = self.store.get(&key).await.map_err(|e| origin_error(&e))?;
        Ok(object.into_stream().map_err(|e| origin_error(&e)).boxed())
    }
}

fn origin_error(e: &object_store::Error) -> SyncError {
    SyncError::Origin(e.to_string())
}

/// Splits `s3://bucket[/prefix]` into the bucket and the prefix (`None` for the bucket's root).
fn parse_url(url: &str) -> Result<(String, Option<Key>), SyncError> {
    let invalid = |why: &str| SyncError::Invalid(format!("S3 url {url:?}: {why}"));
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| invalid("expected s3://bucket/prefix/"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if !valid_bucket(bucket) {
        return Err(invalid(
            "the bucket name must be 3 to 63 lowercase letters, digits, dots or hyphens",
        ));
    }
    if prefix.contains(['?', '#', '%']) {
        return Err(invalid("escapes, queries and fragments are not supported"));
    }
    let prefix = match prefix.trim_matches('/') {
        "" => None,
        p => Some(Key::parse(p).map_err(|e| invalid(&format!("bad prefix: {e}")))?),
    };
    Ok((bucket.to_owned(), prefix))
}

fn valid_bucket(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

fn check_endpoint(endpoint: &str, allow_http: bool) -> Result<(), SyncError> {
    if endpoint.starts_with("https://") || (allow_http && endpoint.starts_with("http://")) {
        return Ok(());
    }
    if endpoint.starts_with("http://") {
        return Err(SyncError::Invalid(format!(
            "S3 endpoint {endpoint:?} is plain http: allow it with allow_http"
        )));
    }
    Err(SyncError::Invalid(format!(
        "S3 endpoint {endpoint:?}: expected an http:// or https:// URL"
    )))
}

/// A user-metadata key as item metadata keys must be: lower case, letters, digits, `_`, `-`
/// and `.` only (others become `_`), at most 64 characters; `None` when nothing is left.
fn sanitize_key(key: &str) -> Option<String> {
    let key: String = key
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(METADATA_KEY_CHARS)
        .collect();
    (!key.is_empty()).then_some(key)
}

#[cfg(test)]
#[path = "s3_tests.rs"]
mod tests;
