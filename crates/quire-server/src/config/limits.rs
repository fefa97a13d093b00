//! `[limits]`: request and upload limits, and the default rate limits of a key.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest uploaded file, in bytes.
    pub max_upload_bytes: u64,
    /// Largest JSON request body, in bytes.
    pub max_json_bytes: usize,
    /// Most files in one bulk upload.
    pub max_bulk_files: usize,
    /// Most bytes of uploads staged at once over all requests (one bulk request included);
    /// beyond it uploads get 507 until earlier ones are stored.
    pub max_staging_bytes: u64,
    /// Free space the data directory's file system keeps: an upload that would leave less
    /// gets 507, so uploads cannot fill the disk the database and indexes need.
    pub min_free_disk_bytes: u64,
    /// Default search requests per minute per key.
    pub search_per_minute: u32,
    /// Default generate requests per minute per key.
    pub generate_per_minute: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_upload_bytes: 100 * 1024 * 1024,
            max_json_bytes: 1024 * 1024,
            max_bulk_files: 100,
            max_staging_bytes: 2 * 1024 * 1024 * 1024,
            min_free_disk_bytes: 512 * 1024 * 1024,
            search_per_minute: 100,
            generate_per_minute: 100,
        }
    }
}

impl LimitsConfig {
    /// The bounds of the upload staging area.
    pub fn staging(&self) -> quire_ingest::StagingLimits {
        quire_ingest::StagingLimits {
            max_bytes: self.max_staging_bytes,
            min_free_bytes: self.min_free_disk_bytes,
        }
    }

    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.max_upload_bytes == 0 {
            bail!("limits.max_upload_bytes must be at least 1");
        }
        if self.search_per_minute == 0 || self.generate_per_minute == 0 {
            bail!("rate limits must be at least 1 request per minute");
        }
        if self.max_staging_bytes < self.max_upload_bytes {
            bail!(
                "limits.max_staging_bytes ({}) must be at least limits.max_upload_bytes ({})",
                self.max_staging_bytes,
                self.max_upload_bytes
            );
        }
        if self.max_bulk_files == 0 {
            bail!("limits.max_bulk_files must be at least 1");
        }
        Ok(())
    }
}
