//! The local staging area, `<data>/tmp`. Uploads are streamed into a staging file while their
//! size is checked and their SHA-256 computed, so no upload is ever held whole in memory, and a
//! rejected upload leaves nothing behind (the staging file is removed when dropped). Complete
//! uploads then go to the [`OriginalStore`](quire_files::OriginalStore); originals fetched
//! from a remote store for parsing are put here too, for as long as the parse takes.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use tempfile::TempPath;
use tokio::fs::File;
use tokio::io::AsyncWriteExt;

/// The staging area for uploads and fetched originals: `<data>/tmp`.
#[derive(Debug, Clone)]
pub struct Staging {
    staging: PathBuf,
    limits: StagingLimits,
    /// Bytes of uploads being received or waiting to be stored, over all requests.
    in_use: Arc<AtomicU64>,
}

/// How much the staging area may hold, so that concurrent uploads cannot fill the disk the
/// database and indexes live on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingLimits {
    /// Most bytes of uploads staged at once, over all requests.
    pub max_bytes: u64,
    /// Free space the file system must keep after an upload's bytes are written.
    pub min_free_bytes: u64,
}

impl StagingLimits {
    /// No limit on the total and no free space kept (for tests and tools).
    pub const UNBOUNDED: Self = Self {
        max_bytes: u64::MAX,
        min_free_bytes: 0,
    };
}

/// How often (in bytes written) a staging file checks the file system's free space.
const FREE_SPACE_CHECK_BYTES: u64 = 8 * 1024 * 1024;

/// Why staging an upload stopped.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The upload is larger than the limit.
    #[error("the file is larger than the {limit}-byte upload limit")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The staging area holds as much as it may (`limits.max_staging_bytes`), or the disk is
    /// nearly full; a later attempt may succeed.
    #[error("{0}")]
    Full(String),
    /// Writing to disk failed.
    #[error("could not write the upload to disk: {0}")]
    Io(#[from] io::Error),
}

/// Bytes a staging file holds of the shared budget; given back when dropped.
#[derive(Debug)]
struct Reservation {
    in_use: Arc<AtomicU64>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.in_use.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// An upload being written to the staging area.
#[derive(Debug)]
pub struct StagedFile {
    file: File,
    path: TempPath,
    hasher: Sha256,
    size: u64,
    limit: u64,
    staging: Staging,
    reservation: Reservation,
    next_free_space_check: u64,
}

/// A fully received upload, still in the staging area.
#[derive(Debug)]
pub struct StagedUpload {
    path: TempPath,
    /// Held until the bytes leave the staging area.
    _reservation: Reservation,
    /// Size in bytes.
    pub size: u64,
    /// Hex SHA-256 of the content.
    pub sha256: String,
}

impl StagedUpload {
    /// The staging file (for sniffing its format before it is committed).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The staging file, still removed when dropped, for the original store to take.
    pub(crate) fn into_temp_path(self) -> TempPath {
        self.path
    }
}

impl Staging {
    /// Uses `<data_dir>/tmp`, creating it, and clears what a previous run that stopped
    /// mid-work left there: staging files of uploads, and spool directories of syncs.
    /// Unbounded until [`Staging::with_limits`].
    pub fn open(data_dir: &Path) -> io::Result<Self> {
        let staging = data_dir.join("tmp");
        if staging.exists() {
            for entry in std::fs::read_dir(&staging)? {
                let path = entry?.path();
                let _ = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
            }
        }
        std::fs::create_dir_all(&staging)?;
        Ok(Self {
            staging,
            limits: StagingLimits::UNBOUNDED,
            in_use: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The same staging area, bounded by `limits`.
    pub fn with_limits(self, limits: StagingLimits) -> Self {
        Self { limits, ..self }
    }

    /// Bytes of uploads staged now, over all requests.
    pub fn in_use(&self) -> u64 {
        self.in_use.load(Ordering::Acquire)
    }

    /// Starts a staging file that refuses to grow past `limit` bytes. Refused with
    /// [`StageError::Full`] when the file system is already short of space.
    pub async fn stage(&self, limit: u64) -> Result<StagedFile, StageError> {
        self.check_free_space(0)?;
        let path = self.temp_path("upload-")?;
        let file = File::create(&path).await?;
        Ok(StagedFile {
            file,
            path,
            hasher: Sha256::new(),
            size: 0,
            limit,
            staging: self.clone(),
            reservation: Reservation {
                in_use: Arc::clone(&self.in_use),
                bytes: 0,
            },
            next_free_space_check: FREE_SPACE_CHECK_BYTES,
        })
    }

    /// Takes `bytes` more of the shared budget for `reservation`, or refuses.
    fn reserve(&self, reservation: &mut Reservation, bytes: u64) -> Result<(), StageError> {
        let max = self.limits.max_bytes;
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= max)
            })
            .map_err(|_| {
                StageError::Full(format!(
                    "the server is receiving as many uploads as it may hold at once \
                     ({max} bytes, limits.max_staging_bytes); try again when they are stored"
                ))
            })?;
        reservation.bytes += bytes;
        Ok(())
    }

    /// Refuses when writing `coming` more bytes would leave less than the free space kept.
    fn check_free_space(&self, coming: u64) -> Result<(), StageError> {
        if self.limits.min_free_bytes == 0 {
            return Ok(());
        }
        let stats = rustix::fs::statvfs(&self.staging).map_err(io::Error::from)?;
        let available = stats.f_bavail.saturating_mul(stats.f_frsize);
        if available.saturating_sub(coming) < self.limits.min_free_bytes {
            tracing::warn!(
                available,
                kept = self.limits.min_free_bytes,
                "uploads refused: the disk is nearly full"
            );
            return Err(StageError::Full(
                "the server's disk is nearly full; the upload was not kept".into(),
            ));
        }
        Ok(())
    }

    /// The staging area's directory, where a sync spools what it fetched (cleared at the
    /// next start if the process dies before it does).
    pub fn directory(&self) -> &Path {
        &self.staging
    }

    /// A new empty file in the staging area, removed when dropped.
    pub(crate) fn temp_path(&self, prefix: &str) -> io::Result<TempPath> {
        Ok(tempfile::Builder::new()
            .prefix(prefix)
            .tempfile_in(&self.staging)?
            .into_temp_path())
    }
}

impl StagedFile {
    /// Appends bytes, failing once the total passes the limit, or when the staging area's
    /// budget or the disk's free space would run out.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), StageError> {
        let len = bytes.len() as u64;
        self.size += len;
        if self.size > self.limit {
            return Err(StageError::TooLarge { limit: self.limit });
        }
        self.staging.reserve(&mut self.reservation, len)?;
        if self.size >= self.next_free_space_check {
            self.staging.check_free_space(FREE_SPACE_CHECK_BYTES)?;
            self.next_free_space_check = self.size + FREE_SPACE_CHECK_BYTES;
        }
        self.hasher.update(bytes);
        self.file.write_all(bytes).await?;
        Ok(())
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Flushes the file to disk and returns the finished upload.
    pub async fn finish(mut self) -> Result<StagedUpload, StageError> {
        self.file.flush().await?;
        self.file.sync_all().await?;
        Ok(StagedUpload {
            path: self.path,
            _reservation: self.reservation,
            size: self.size,
            sha256: hex::encode(self.hasher.finalize()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quire_core::DocumentId;
    use quire_files::{LocalFiles, OriginalStore};

    #[tokio::test]
    async fn staged_uploads_are_hashed_and_committed() {
        let dir = tempfile::tempdir().unwrap();
        let staging = Staging::open(dir.path()).unwrap();
        let mut staged = staging.stage(100).await.unwrap();
        staged.write(b"hello ").await.unwrap();
        staged.write(b"world").await.unwrap();
        let upload = staged.finish().await.unwrap();
        assert_eq!(upload.size, 11);
        assert_eq!(
            upload.sha256,
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        let id = DocumentId::new();
        let files = LocalFiles::in_data_dir(dir.path()).unwrap();
        files.put(id, upload.into_temp_path()).await.unwrap();
        let path = dir.path().join("files").join(id.to_string());
        assert_eq!(std::fs::read(path).unwrap(), b"hello world");
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );
    }

    #[tokio::test]
    async fn the_staging_budget_is_shared_and_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let staging = Staging::open(dir.path())
            .unwrap()
            .with_limits(StagingLimits {
                max_bytes: 10,
                min_free_bytes: 0,
            });
        let mut first = staging.stage(100).await.unwrap();
        first.write(b"123456").await.unwrap();
        let mut second = staging.stage(100).await.unwrap();
        second.write(b"1234").await.unwrap();
        assert_eq!(staging.in_use(), 10);
        assert!(matches!(second.write(b"5").await, Err(StageError::Full(_))));
        let held = first.finish().await.unwrap();
        assert_eq!(staging.in_use(), 10, "a finished upload holds its bytes");
        drop(held);
        assert_eq!(staging.in_use(), 4);
        second.write(b"567890").await.unwrap();
        drop(second);
        assert_eq!(staging.in_use(), 0);
    }

    #[tokio::test]
    async fn uploads_are_refused_when_the_disk_keeps_too_little() {
        let dir = tempfile::tempdir().unwrap();
        let staging = Staging::open(dir.path())
            .unwrap()
            .with_limits(StagingLimits {
                max_bytes: u64::MAX,
                min_free_bytes: u64::MAX,
            });
        assert!(matches!(staging.stage(100).await, Err(StageError::Full(_))));
    }

    #[test]
    fn what_a_stopped_process_left_in_staging_is_cleared_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("tmp");
        std::fs::create_dir_all(staging.join("web-abc")).unwrap();
        std::fs::write(staging.join("web-abc").join("0.page"), b"<html>").unwrap();
        std::fs::write(staging.join("upload-xyz"), b"half an upload").unwrap();
        let opened = Staging::open(dir.path()).unwrap();
        assert_eq!(opened.directory(), staging);
        assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn oversized_uploads_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let staging = Staging::open(dir.path()).unwrap();
        let mut staged = staging.stage(4).await.unwrap();
        assert!(matches!(
            staged.write(b"12345").await,
            Err(StageError::TooLarge { limit: 4 })
        ));
        drop(staged);
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );
    }
}
