//! Originals as objects in S3-compatible storage, through the `object_store` crate.
//!
//! Small files go up in one PUT; larger ones as a multipart upload streamed from the staged
//! file part by part. Either way S3 makes an object visible only when it is complete, and a
//! failed multipart upload is aborted so no parts linger.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
    WriteMultipart,
};
use quire_core::DocumentId;
use tempfile::TempPath;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{FilesError, OriginalStore, S3Settings};

/// Size of one part of a multipart upload, and the largest file sent in a single PUT. S3
/// wants parts of at least 5 MiB; this bounds the memory one upload holds.
const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 2;

/// Originals in a bucket of S3-compatible storage: `<prefix>/<document id>`.
#[derive(Clone)]
pub struct S3Files {
    store: Arc<AmazonS3>,
    bucket: String,
    prefix: Option<Key>,
}

/// Names the bucket and prefix only: the client's configuration holds the credentials.
impl std::fmt::Debug for S3Files {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Files")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix.as_ref().map(Key::as_ref))
            .finish_non_exhaustive()
    }
}

impl S3Files {
    /// Connects lazily (nothing is sent until the first call) to `bucket` under `prefix`.
    pub fn new(bucket: &str, prefix: &str, settings: &S3Settings) -> Result<Self, FilesError> {
        let client = ClientOptions::new()
            .with_allow_http(settings.allow_http)
            .with_connect_timeout(settings.connect_timeout)
            .with_timeout(settings.request_timeout);
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: settings.max_retries,
            // Bounds the retries of one call: a storage outage is reported, not waited out.
            retry_timeout: settings.request_timeout,
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(settings.region.as_deref().unwrap_or("us-east-1"))
            .with_allow_http(settings.allow_http)
            .with_client_options(client)
            .with_retry(retry);
        if let Some(endpoint) = &settings.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(id) = &settings.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &settings.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        let store = builder.build().map_err(|e| match FilesError::from(e) {
            FilesError::Invalid(m) | FilesError::Unavailable(m) => FilesError::Invalid(m),
            other => other,
        })?;
        let prefix = match prefix.trim_matches('/') {
            "" => None,
            p => Some(Key::parse(p).map_err(|e| FilesError::Invalid(e.to_string()))?),
        };
        Ok(Self {
            store: Arc::new(store),
            bucket: bucket.to_owned(),
            prefix,
        })
    }

    fn key(&self, id: DocumentId) -> Key {
        let name = id.to_string();
        match &self.prefix {
            Some(prefix) => prefix.clone().join(name.as_str()),
            None => Key::from(name.as_str()),
        }
    }

    async fn upload_parts(&self, key: &Key, file: &mut tokio::fs::File) -> Result<(), FilesError> {
        let upload = self.store.put_multipart(key).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buf = vec![0; 1024 * 1024];
        let streamed: Result<(), FilesError> = async {
            loop {
                writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                let n = file.read(&mut buf).await?;
                if n == 0 {
                    return Ok(());
                }
                writer.write(&buf[..n]);
            }
        }
        .await;
        match streamed {
            Ok(()) => {
                writer.finish().await?;
                Ok(())
            }
            Err(e) => {
                // Leaves no stored parts behind (the object itself never became visible).
                if let Err(abort) = writer.abort().await {
                    tracing::warn!(error = %abort, "could not abort a failed multipart upload");
                }
                Err(e)
            }
        }
    }
}

#[async_trait]
impl OriginalStore for S3Files {
    async fn put(&self, id: DocumentId, staged: TempPath) -> Result<(), FilesError> {
        let key = self.key(id);
        let mut file = tokio::fs::File::open(&staged).await?;
        let size = file.metadata().await?.len();
        let stored = if size <= PART_BYTES as u64 {
            let mut bytes = Vec::with_capacity(size as usize);
            file.read_to_end(&mut bytes).await?;
            self.store
                .put(&key, PutPayload::from(bytes))
                .await
                .map(drop)
                .map_err(FilesError::from)
        } else {
            self.upload_parts(&key, &mut file).await
        };
        drop(file);
        drop(staged);
        stored.map_err(|e| match e {
            // On a PUT, "not found" can only be the bucket: a setting, not a missing original.
            FilesError::NotFound(m) => FilesError::Invalid(m),
            other => other,
        })
    }

    async fn fetch_to(&self, id: DocumentId, dest: &Path) -> Result<(), FilesError> {
        let key = self.key(id);
        let fetched: Result<(), FilesError> = async {
            let mut stream = self.store.get(&key).await?.into_stream();
            let mut out = tokio::fs::File::create(dest).await?;
            while let Some(bytes) = stream.next().await {
                out.write_all(&bytes?).await?;
            }
            out.sync_all().await?;
            Ok(())
        }
        .await;
        if fetched.is_err() {
            let _ = tokio::fs::remove_file(dest).await;
        }
        fetched
    }

    async fn remove(&self, id: DocumentId) -> Result<(), FilesError> {
        match self.store.delete(&self.key(id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn list(&self) -> Result<Vec<DocumentId>, FilesError> {
        let mut ids = Vec::new();
        let mut objects = self.store.list(self.prefix.as_ref());
        while let Some(object) = objects.next().await {
            // Only objects directly under the prefix and named by an id are originals.
            let object = object?;
            let name = object.location.filename().and_then(|n| n.parse().ok());
            let parent_is_prefix = match &self.prefix {
                Some(prefix) => {
                    object.location.prefix_match(prefix).map(Iterator::count) == Some(1)
                }
                None => object.location.parts().count() == 1,
            };
            if let (Some(id), true) = (name, parent_is_prefix) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    fn local_path(&self, _id: DocumentId) -> Option<PathBuf> {
        None
    }
}
