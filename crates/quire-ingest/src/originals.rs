//! The local staging area, `<data>/tmp`. Uploads are streamed into a staging file while their
//! size is checked and their SHA-256 computed, so no upload is ever held whole in memory, and a
//! rejected upload leaves nothing behind (the staging file is removed when dropped). Complete
//! uploads then go to the [`OriginalStore`](quire_files::OriginalStore); originals fetched
//! from a remote store for parsing are put here too, for as long as the parse takes.

use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tempfile::TempPath;
use tokio::fs::File;
use tokio::io::AsyncWriteExt;

/// The staging area for uploads and fetched originals: `<data>/tmp`.
#[derive(Debug, Clone)]
pub struct Staging {
    staging: PathBuf,
}

/// Why staging an upload stopped.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The upload is larger than the limit.
    #[error("the file is larger than the {limit}-byte upload limit")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// Writing to disk failed.
    #[error("could not write the upload to disk: {0}")]
    Io(#[from] io::Error),
}

/// An upload being written to the staging area.
#[derive(Debug)]
pub struct StagedFile {
    file: File,
    path: TempPath,
    hasher: Sha256,
    size: u64,
    limit: u64,
}

/// A fully received upload, still in the staging area.
#[derive(Debug)]
pub struct StagedUpload {
    path: TempPath,
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
    /// Uses `<data_dir>/tmp`, creating it, and clears staging files left by a previous run
    /// that stopped mid-upload.
    pub fn open(data_dir: &Path) -> io::Result<Self> {
        let staging = data_dir.join("tmp");
        if staging.exists() {
            for entry in std::fs::read_dir(&staging)? {
                let _ = std::fs::remove_file(entry?.path());
            }
        }
        std::fs::create_dir_all(&staging)?;
        Ok(Self { staging })
    }

    /// Starts a staging file that refuses to grow past `limit` bytes.
    pub async fn stage(&self, limit: u64) -> Result<StagedFile, StageError> {
        let path = self.temp_path("upload-")?;
        let file = File::create(&path).await?;
        Ok(StagedFile {
            file,
            path,
            hasher: Sha256::new(),
            size: 0,
            limit,
        })
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
    /// Appends bytes, failing once the total passes the limit.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), StageError> {
        self.size += bytes.len() as u64;
        if self.size > self.limit {
            return Err(StageError::TooLarge { limit: self.limit });
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
