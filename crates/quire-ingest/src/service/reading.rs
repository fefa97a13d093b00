//! Reading an original back for a client that downloads it.

use quire_core::DocumentId;
use quire_files::FilesError;

use super::{Ingest, IngestError};

impl Ingest {
    /// The original of document `id`, opened for reading: in place when the originals are
    /// local files, else fetched into the staging area first (the copy's name is removed at
    /// once, so it lives only as long as the returned file). `None` when no original is
    /// stored (the document was deleted meanwhile).
    pub async fn open_original(
        &self,
        id: DocumentId,
    ) -> Result<Option<tokio::fs::File>, IngestError> {
        if let Some(path) = self.files.local_path(id) {
            return match tokio::fs::File::open(&path).await {
                Ok(file) => Ok(Some(file)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(IngestError::Io(e)),
            };
        }
        let copy = self
            .staging
            .temp_path("download-")
            .map_err(IngestError::Io)?;
        match self.files.fetch_to(id, &copy).await {
            Ok(()) => {}
            Err(FilesError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let file = tokio::fs::File::open(&copy)
            .await
            .map_err(IngestError::Io)?;
        // Dropping the path unlinks the copy; the open file keeps its bytes until closed.
        drop(copy);
        Ok(Some(file))
    }
}
