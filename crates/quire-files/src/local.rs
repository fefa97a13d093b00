//! Originals as files in one local directory, named by document id: the data directory's
//! `files/` layout that Quire has always used, so existing data directories keep working.

use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use quire_core::DocumentId;
use tempfile::TempPath;

use crate::{FilesError, OriginalStore};

/// Originals in a local directory: `<dir>/<document id>`.
#[derive(Debug, Clone)]
pub struct LocalFiles {
    dir: PathBuf,
}

impl LocalFiles {
    /// Uses `dir` (creating it) for the originals.
    pub fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// The data directory's `files/`, where a single-node Quire keeps originals.
    pub fn in_data_dir(data_dir: &Path) -> io::Result<Self> {
        Self::open(&data_dir.join("files"))
    }

    fn path_of(&self, id: DocumentId) -> PathBuf {
        self.dir.join(id.to_string())
    }
}

#[async_trait]
impl OriginalStore for LocalFiles {
    async fn put(&self, id: DocumentId, staged: TempPath) -> Result<(), FilesError> {
        let target = self.path_of(id);
        // A rename is atomic: readers see the old file or the whole new one.
        let staged = match staged.persist(&target) {
            Ok(()) => return Ok(()),
            Err(e) if e.error.kind() == io::ErrorKind::CrossesDevices => e.path,
            Err(e) => return Err(e.error.into()),
        };
        // Staging on another file system: copy next to the target, then rename.
        let dir = self.dir.clone();
        let copy = tokio::task::spawn_blocking(move || -> io::Result<TempPath> {
            let copy = tempfile::Builder::new()
                .prefix(".incoming-")
                .tempfile_in(&dir)?
                .into_temp_path();
            std::fs::copy(&staged, &copy)?;
            Ok(copy)
        })
        .await
        .map_err(io::Error::other)??;
        copy.persist(&target).map_err(|e| e.error)?;
        Ok(())
    }

    async fn list(&self) -> Result<Vec<DocumentId>, FilesError> {
        let mut ids = Vec::new();
        let mut entries = tokio::fs::read_dir(&self.dir).await?;
        while let Some(entry) = entries.next_entry().await? {
            // Copies in flight (`.incoming-…`) and anything else not named by an id are skipped.
            if let Some(id) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    async fn fetch_to(&self, id: DocumentId, dest: &Path) -> Result<(), FilesError> {
        let mut original = match tokio::fs::File::open(self.path_of(id)).await {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(FilesError::NotFound(format!("the original of {id}")));
            }
            Err(e) => return Err(e.into()),
        };
        let copied = async {
            let mut out = tokio::fs::File::create(dest).await?;
            tokio::io::copy(&mut original, &mut out).await?;
            out.sync_all().await
        };
        if let Err(e) = copied.await {
            let _ = tokio::fs::remove_file(dest).await;
            return Err(e.into());
        }
        Ok(())
    }

    async fn remove(&self, id: DocumentId) -> Result<(), FilesError> {
        match tokio::fs::remove_file(self.path_of(id)).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn local_path(&self, id: DocumentId) -> Option<PathBuf> {
        Some(self.path_of(id))
    }
}
