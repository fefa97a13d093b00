//! Where originals live, as the `[files]` configuration says it: a URL and, for S3, the
//! connection settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::FilesError;

/// Where originals are kept: parsed from `file:///path` or `s3://bucket/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilesLocation {
    /// A local directory holding `<document id>` files (the data directory's `files/`).
    Local(PathBuf),
    /// A bucket of S3-compatible storage; objects are named `<prefix>/<document id>`.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix without leading or trailing `/`; empty for the bucket's root.
        prefix: String,
    },
}

impl FilesLocation {
    /// Parses `file:///absolute/path` or `s3://bucket[/prefix]`.
    pub fn parse(url: &str) -> Result<Self, FilesError> {
        let invalid = |why: &str| FilesError::Invalid(format!("files url {url:?}: {why}"));
        if let Some(path) = url.strip_prefix("file://") {
            // Only the empty host: `file://relative` would silently drop its first component.
            if !path.starts_with('/') {
                return Err(invalid("expected file:///absolute/path"));
            }
            if path.contains('%') || path.contains('?') || path.contains('#') {
                return Err(invalid("escapes, queries and fragments are not supported"));
            }
            return Ok(Self::Local(PathBuf::from(path)));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if !valid_bucket(bucket) {
                return Err(invalid(
                    "the bucket name must be 3 to 63 lowercase letters, digits, dots or hyphens",
                ));
            }
            let prefix = prefix.trim_matches('/');
            if !prefix.is_empty() {
                object_store::path::Path::parse(prefix)
                    .map_err(|e| invalid(&format!("bad prefix: {e}")))?;
            }
            if prefix.contains(['?', '#', '%']) {
                return Err(invalid("escapes, queries and fragments are not supported"));
            }
            return Ok(Self::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        Err(invalid("expected file:///path or s3://bucket/prefix"))
    }
}

fn valid_bucket(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

/// How to reach S3-compatible storage. A plain struct: the `[files]` configuration section
/// (and its `QUIRE_FILES_…` variables) maps onto it field by field.
#[derive(Clone)]
pub struct S3Settings {
    /// The service's base URL (`https://s3.example.net`, `http://127.0.0.1:9000`); `None`
    /// for AWS itself, addressed by region.
    pub endpoint: Option<String>,
    /// The region requests are signed for (`us-east-1` when `None`).
    pub region: Option<String>,
    /// Access key id; with the secret below. When both are `None` the ambient credentials
    /// (instance metadata, web identity) are used.
    pub access_key_id: Option<String>,
    /// Secret access key. Never printed: `Debug` shows only whether it is set.
    pub secret_access_key: Option<String>,
    /// Allows a plain `http://` endpoint (test servers, a storage service on a private link).
    pub allow_http: bool,
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// Longest one request may take (one part of a large upload, or a whole download's
    /// response to start and stream).
    pub request_timeout: Duration,
    /// Retries of a failed request (transport errors, 5xx) before the store is reported
    /// unavailable.
    pub max_retries: usize,
}

impl Default for S3Settings {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            allow_http: false,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            max_retries: 3,
        }
    }
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_http", &self.allow_http)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_s3_urls_parse() {
        assert_eq!(
            FilesLocation::parse("file:///var/lib/quire/files").unwrap(),
            FilesLocation::Local(PathBuf::from("/var/lib/quire/files"))
        );
        assert_eq!(
            FilesLocation::parse("s3://quire-originals/prod/eu/").unwrap(),
            FilesLocation::S3 {
                bucket: "quire-originals".into(),
                prefix: "prod/eu".into()
            }
        );
        assert_eq!(
            FilesLocation::parse("s3://quire-originals").unwrap(),
            FilesLocation::S3 {
                bucket: "quire-originals".into(),
                prefix: String::new()
            }
        );
    }

    #[test]
    fn malformed_urls_are_invalid() {
        for url in [
            "file://relative/path",
            "s3://",
            "s3://Upper",
            "s3://ab",
            "s3://bucket/a//b",
            "s3://bucket/p?x=1",
            "gs://bucket",
            "/var/lib/quire",
        ] {
            assert!(
                matches!(FilesLocation::parse(url), Err(FilesError::Invalid(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn the_secret_is_never_printed() {
        let settings = S3Settings {
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("wJalrXUtnFEMI/K7MDENG".into()),
            ..S3Settings::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("AKIDEXAMPLE"));
        assert!(!shown.contains("wJalrXUtnFEMI"), "{shown}");
    }
}
