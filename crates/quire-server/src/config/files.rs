//! `[files]`: where the originals (uploaded files, as received) are kept: a directory on this
//! machine (`<data_dir>/files` by default) or an S3-compatible bucket shared by every node.
//! Checked at start, so a configuration that cannot work is refused with a clear message
//! rather than at the first upload.

use std::path::{Path, PathBuf};

use anyhow::bail;
use quire_core::Secret;
use serde::{Deserialize, Serialize};

/// `[files]`: a directory on this machine (the default) or an S3-compatible bucket.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilesConfig {
    /// `file:///path/to/files` or `s3://bucket[/prefix]`; unset: `file://<data_dir>/files`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The S3 API's address for services other than AWS (MinIO, Garage, Ceph, R2, …); unset:
    /// AWS for `region`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The bucket's region; unset: the SDK's usual sources (`AWS_REGION`, the profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Access key id; unset: the SDK's usual sources (environment, profile, instance role).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    /// Secret access key, with `access_key_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<Secret<String>>,
    /// Allow an `endpoint` over plain `http://` (a local MinIO); refused otherwise, since the
    /// keys and every original would cross the network in clear.
    pub allow_http: bool,
}

/// Where originals are kept, as `files.url` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilesLocation {
    /// A directory on this machine.
    Local(PathBuf),
    /// A bucket of an S3-compatible object store.
    S3 {
        /// The bucket's name.
        bucket: String,
        /// Key prefix inside the bucket (no leading or trailing `/`); `None`: the bucket's
        /// root.
        prefix: Option<String>,
    },
}

impl FilesLocation {
    /// Parses `file://<path>` or `s3://bucket[/prefix]`.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        if url.contains(['?', '#']) {
            bail!("files.url {url:?} has a query or fragment; it takes none");
        }
        if let Some(path) = url.strip_prefix("file://") {
            if path.is_empty() {
                bail!(
                    "files.url \"file://\" names no directory (use file:///path/to/files, or \
                     leave files.url unset for <data_dir>/files)"
                );
            }
            return Ok(Self::Local(PathBuf::from(path)));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            check_bucket(bucket)?;
            let prefix = prefix.trim_matches('/');
            return Ok(Self::S3 {
                bucket: bucket.to_owned(),
                prefix: (!prefix.is_empty()).then(|| prefix.to_owned()),
            });
        }
        bail!("files.url {url:?} is neither file://<directory> nor s3://<bucket>[/<prefix>]")
    }
}

/// S3's bucket naming rules (3–63 characters: lower-case letters, digits, `.` and `-`,
/// beginning and ending with a letter or digit), so a typo is caught before any request.
fn check_bucket(bucket: &str) -> anyhow::Result<()> {
    if bucket.is_empty() {
        bail!("files.url \"s3://\" names no bucket (use s3://<bucket>[/<prefix>])");
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&bucket.len())
        || !bucket.chars().all(allowed)
        || !edge(bucket.chars().next())
        || !edge(bucket.chars().last())
    {
        bail!(
            "files.url: {bucket:?} is not a valid S3 bucket name (3 to 63 lower-case letters, \
             digits, '.' or '-', beginning and ending with a letter or digit)"
        );
    }
    Ok(())
}

impl FilesConfig {
    /// Where originals are kept: `url`, else `files/` in `data_dir`.
    pub fn location(&self, data_dir: &Path) -> anyhow::Result<FilesLocation> {
        match &self.url {
            Some(url) => FilesLocation::parse(url),
            None => Ok(FilesLocation::Local(data_dir.join("files"))),
        }
    }

    /// The originals' store as `quire-files` opens it: where, and how to reach S3.
    pub fn store_settings(
        &self,
        data_dir: &Path,
    ) -> anyhow::Result<(quire_files::FilesLocation, quire_files::S3Settings)> {
        let location = match self.location(data_dir)? {
            FilesLocation::Local(dir) => quire_files::FilesLocation::Local(dir),
            FilesLocation::S3 { bucket, prefix } => quire_files::FilesLocation::S3 {
                bucket,
                prefix: prefix.unwrap_or_default(),
            },
        };
        let s3 = quire_files::S3Settings {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.as_ref().map(|s| s.expose().clone()),
            allow_http: self.allow_http,
            ..quire_files::S3Settings::default()
        };
        Ok((location, s3))
    }

    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self, data_dir: &Path) -> anyhow::Result<()> {
        self.location(data_dir)?;
        if let Some(endpoint) = &self.endpoint {
            match endpoint.split_once("://") {
                Some(("https", rest)) if !rest.is_empty() => {}
                Some(("http", rest)) if !rest.is_empty() => {
                    if !self.allow_http {
                        bail!(
                            "files.endpoint {endpoint:?} is plain http; use https, or set \
                             files.allow_http = true for a server on a trusted network"
                        );
                    }
                }
                _ => bail!("files.endpoint {endpoint:?} must be an http:// or https:// URL"),
            }
        }
        if self.access_key_id.is_some() != self.secret_access_key.is_some() {
            bail!("files.access_key_id and files.secret_access_key go together");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{env, load};

    #[test]
    fn unset_means_the_data_directory() {
        let c = load(&[("QUIRE_DATA_DIR", "/srv/quire")]).unwrap();
        assert_eq!(c.files, FilesConfig::default());
        assert_eq!(
            c.files_location().unwrap(),
            FilesLocation::Local(PathBuf::from("/srv/quire/files"))
        );
    }

    #[test]
    fn urls_of_both_kinds_parse() {
        let cases = [
            (
                "file:///var/lib/quire-files",
                FilesLocation::Local(PathBuf::from("/var/lib/quire-files")),
            ),
            (
                "s3://quire-originals",
                FilesLocation::S3 {
                    bucket: "quire-originals".into(),
                    prefix: None,
                },
            ),
            (
                "s3://quire.originals-2/tenant/a/",
                FilesLocation::S3 {
                    bucket: "quire.originals-2".into(),
                    prefix: Some("tenant/a".into()),
                },
            ),
        ];
        for (url, expected) in cases {
            let c = load(&[("QUIRE_FILES_URL", url)]).unwrap();
            assert_eq!(c.files.url.as_deref(), Some(url));
            assert_eq!(c.files_location().unwrap(), expected, "{url}");
        }
    }

    #[test]
    fn bad_urls_are_refused_with_the_key_named() {
        for url in [
            "ftp://host/files",
            "/var/lib/files",
            "file://",
            "s3://",
            "s3:///prefix",
            "s3://ab",
            "s3://Quire_Files",
            "s3://-quire",
            "s3://quire?region=x",
        ] {
            let err = load(&[("QUIRE_FILES_URL", url)]).unwrap_err();
            assert!(format!("{err:#}").contains("files.url"), "{url}: {err:#}");
        }
    }

    #[test]
    fn s3_settings_come_from_the_environment_and_the_secret_is_never_shown() {
        let c = load(&[
            ("QUIRE_FILES_URL", "s3://quire/originals"),
            ("QUIRE_FILES_ENDPOINT", "http://localhost:9000"),
            ("QUIRE_FILES_REGION", "eu-central-1"),
            ("QUIRE_FILES_ACCESS_KEY_ID", "AKIAEXAMPLE"),
            ("QUIRE_FILES_SECRET_ACCESS_KEY", "s3cr3t-value"),
            ("QUIRE_FILES_ALLOW_HTTP", "true"),
        ])
        .unwrap();
        let f = &c.files;
        assert_eq!(f.endpoint.as_deref(), Some("http://localhost:9000"));
        assert_eq!(f.region.as_deref(), Some("eu-central-1"));
        assert_eq!(f.access_key_id.as_deref(), Some("AKIAEXAMPLE"));
        assert_eq!(
            f.secret_access_key.as_ref().unwrap().expose(),
            "s3cr3t-value"
        );
        assert!(f.allow_http);
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
        assert!(shown.contains("AKIAEXAMPLE"), "{shown}");
    }

    #[test]
    fn plain_http_needs_allow_http_and_keys_come_in_pairs() {
        let err = load(&[("QUIRE_FILES_ENDPOINT", "http://minio:9000")]).unwrap_err();
        assert!(format!("{err:#}").contains("files.allow_http"), "{err:#}");
        let err = load(&[("QUIRE_FILES_ENDPOINT", "minio:9000")]).unwrap_err();
        assert!(format!("{err:#}").contains("files.endpoint"), "{err:#}");
        load(&[("QUIRE_FILES_ENDPOINT", "https://minio:9000")]).unwrap();
        let err = load(&[("QUIRE_FILES_ACCESS_KEY_ID", "AKIAEXAMPLE")]).unwrap_err();
        assert!(
            format!("{err:#}").contains("files.secret_access_key"),
            "{err:#}"
        );
        let err = load(&[("QUIRE_FILES_ALLOW_HTTP", "maybe")]).unwrap_err();
        assert!(
            format!("{err:#}").contains("QUIRE_FILES_ALLOW_HTTP"),
            "{err:#}"
        );
    }

    #[test]
    fn an_empty_variable_unsets_a_url_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.toml");
        std::fs::write(&file, "[files]\nurl = \"s3://quire\"\n").unwrap();
        let c = crate::config::Config::load(
            Some(&file),
            env(&[("QUIRE_FILES_URL", "")]),
            &crate::config::Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.files.url, None);
    }
}
