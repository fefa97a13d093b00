//! Taking uploads in: staging them, storing each original and its `queued` document in one
//! transaction for all, and answering an upload the source already holds with the document
//! it is.

use quire_core::{DocumentId, ExternalId, NewDocument, SourceId, SourceRecord, SourceScope};
use quire_parse::guess_content_type;
use quire_store::{Created, StoreError};

use super::{Ingest, IngestError};
use crate::originals::{StagedFile, StagedUpload};

/// Longest stored file name, in characters.
const MAX_NAME_CHARS: usize = 255;

/// A received file, staged on disk, with what the client said about it.
#[derive(Debug)]
pub struct Upload {
    /// File name from the multipart part.
    pub name: String,
    /// Media type from the multipart part, if any.
    pub content_type: Option<String>,
    /// The staged bytes.
    pub staged: StagedUpload,
    /// What the caller says the document is; for a new version, `None` keeps the document's.
    pub metadata: Option<quire_core::Metadata>,
    /// The caller's own key for the document: a key the source holds makes this upload a new
    /// version of that document.
    pub external_id: Option<ExternalId>,
}

impl Ingest {
    /// The source `id` if the caller may upload into it.
    pub async fn source(
        &self,
        scope: &SourceScope,
        id: SourceId,
    ) -> Result<SourceRecord, IngestError> {
        self.store
            .get_source(scope, id)
            .await?
            .ok_or(IngestError::SourceNotFound)
    }

    /// Starts staging an upload, limited to the configured maximum size.
    pub async fn stage(&self) -> Result<StagedFile, IngestError> {
        Ok(self.staging.stage(self.settings.max_upload_bytes).await?)
    }

    /// Stores an upload as a new `queued` document of `source` and wakes a worker. When the
    /// source already holds the same bytes (and that document has not failed), nothing is
    /// stored and the existing document is returned as [`Created::Existing`]. The original is
    /// stored before the document is created, so a store of originals that is down
    /// ([`IngestError::FilesUnavailable`]) leaves no document behind.
    pub async fn accept(
        &self,
        scope: &SourceScope,
        source: SourceId,
        upload: Upload,
    ) -> Result<Created, IngestError> {
        let accepted = self.accept_all(scope, source, vec![upload]).await?;
        accepted
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(missing()))
    }

    /// Stores uploads as [`Ingest::accept`] does each, in order, with one store transaction
    /// for all their documents: what became of each upload, or, when the source is not there
    /// or the store fails, an error for them all (and nothing is stored). An upload whose
    /// original could not be stored fails alone.
    pub async fn accept_all(
        &self,
        scope: &SourceScope,
        source: SourceId,
        uploads: Vec<Upload>,
    ) -> Result<Vec<Result<Created, IngestError>>, IngestError> {
        self.source(scope, source).await?;
        let mut put = Vec::with_capacity(uploads.len());
        let mut documents = Vec::with_capacity(uploads.len());
        for upload in uploads {
            let document = self.new_document(source, &upload);
            let id = document.id;
            match self.files.put(id, upload.staged.into_temp_path()).await {
                Ok(()) => {
                    documents.push(document);
                    put.push(Ok(id));
                }
                Err(e) => put.push(Err(e.into())),
            }
        }
        let created = match self.store.create_documents(documents).await {
            Ok(created) => created,
            Err(e) => {
                for id in put.iter().filter_map(|p| p.as_ref().ok()) {
                    self.remove_original(*id).await;
                }
                return Err(e.into());
            }
        };
        let mut created = created.into_iter();
        let mut outcomes = Vec::with_capacity(put.len());
        for outcome in put {
            outcomes.push(match outcome {
                Ok(id) => match created.next() {
                    Some(new @ (Created::New(_) | Created::Version(_))) => {
                        self.wakeup.notify_one();
                        Ok(new)
                    }
                    Some(existing @ Created::Existing(_)) => {
                        self.remove_original(id).await;
                        Ok(existing)
                    }
                    None => Err(missing()),
                },
                Err(e) => Err(e),
            });
        }
        Ok(outcomes)
    }

    /// Stores `upload` as a new version of document `id` of `source`: 202-like
    /// [`Created::Version`], or [`Created::Existing`] when its newest version has these bytes
    /// (then only the metadata given, if any, changed). `None` when there is no such document
    /// in `scope`.
    pub async fn accept_version(
        &self,
        scope: &SourceScope,
        source: SourceId,
        id: DocumentId,
        upload: Upload,
    ) -> Result<Option<Created>, IngestError> {
        self.source(scope, source).await?;
        let document = self.new_document(source, &upload);
        let index_id = document.id;
        self.files
            .put(index_id, upload.staged.into_temp_path())
            .await?;
        let created = match self.store.add_version(scope, id, document).await {
            Ok(created) => created,
            Err(e) => {
                self.remove_original(index_id).await;
                return Err(e.into());
            }
        };
        match &created {
            Some(Created::Version(_)) => self.wakeup.notify_one(),
            _ => self.remove_original(index_id).await,
        }
        Ok(created)
    }

    /// The document an upload becomes: a new id, its cleaned name, and its media type as the
    /// client gave it or guessed from the name.
    fn new_document(&self, source: SourceId, upload: &Upload) -> NewDocument {
        let name = clean_file_name(&upload.name);
        let content_type = match upload.content_type.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() && t != "application/octet-stream" => t.to_owned(),
            _ => guess_content_type(&name).to_owned(),
        };
        NewDocument {
            id: DocumentId::new(),
            source_id: source,
            name,
            content_type,
            size: upload.staged.size,
            sha256: upload.staged.sha256.clone(),
            metadata: upload.metadata.clone(),
            external_id: upload.external_id.clone(),
            created_at: self.clock.now(),
        }
    }
}

/// The store answered fewer documents than it was given: a broken store, never the upload's
/// fault.
fn missing() -> IngestError {
    StoreError::Corrupt("the store created fewer documents than it was given".into()).into()
}

/// The last path component of a client-supplied file name, without control characters, at
/// most 255 characters; `upload` when nothing is left.
pub fn clean_file_name(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        "upload".to_owned()
    } else {
        cleaned.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_lose_directories_and_control_characters() {
        assert_eq!(clean_file_name("../../etc/passwd"), "passwd");
        assert_eq!(clean_file_name("C:\\Users\\me\\report.md"), "report.md");
        assert_eq!(clean_file_name("a\u{0}b\n.txt"), "ab.txt");
        assert_eq!(clean_file_name(""), "upload");
        assert_eq!(clean_file_name(".."), "upload");
        assert_eq!(clean_file_name(&"x".repeat(300)).len(), 255);
    }
}
