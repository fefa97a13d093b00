//! A directory on the server as an origin. Only directories under the operator's configured
//! roots can be synced, and the walk never leaves the folder, even through symbolic links.

use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::io;
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use chrono::{DateTime, SecondsFormat, Utc};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::io::AsyncReadExt;

use crate::{Item, MODIFIED_AT, Origin, Patterns, SyncError, size_mtime_fingerprint};

/// Bytes read from a file at a time while streaming it.
const CHUNK_BYTES: usize = 64 * 1024;

/// Where the operator allows folder sources, for messages.
const ROOTS_SETTING: &str = "connectors.folder_roots (QUIRE_CONNECTORS_FOLDER_ROOTS)";

/// A directory on the server.
#[derive(Debug, Clone)]
pub struct FolderOrigin {
    /// Canonical: every path the walk takes must stay under it.
    folder: PathBuf,
    patterns: Patterns,
}

impl FolderOrigin {
    /// `path` must be inside one of `roots` (after resolving `..` and symbolic links, comparing
    /// canonical paths); otherwise [`SyncError::Invalid`] says which roots are allowed, or
    /// that none is configured. The folder must exist and be a directory.
    pub fn open(roots: &[PathBuf], path: &Path, patterns: Patterns) -> Result<Self, SyncError> {
        if roots.is_empty() {
            return Err(SyncError::Invalid(format!(
                "folder sources are disabled: no folder root is configured; set {ROOTS_SETTING}"
            )));
        }
        if !path.is_absolute() {
            return Err(SyncError::Invalid(format!(
                "folder {} must be an absolute path",
                path.display()
            )));
        }
        let outside = || {
            let allowed: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            SyncError::Invalid(format!(
                "folder {} is outside the allowed roots ({}); see {ROOTS_SETTING}",
                path.display(),
                allowed.join(", ")
            ))
        };
        // A lexical check first, so paths outside the roots are refused without telling
        // whether they exist (a root may itself be reached through links: both forms count).
        let canonical_roots: Vec<PathBuf> = roots
            .iter()
            .filter_map(|root| fs::canonicalize(root).ok())
            .collect();
        let lexical = normalize(path);
        let lexically_inside = roots
            .iter()
            .map(|root| normalize(root))
            .chain(canonical_roots.iter().cloned())
            .any(|root| lexical.starts_with(root));
        if !lexically_inside {
            return Err(outside());
        }
        let folder = fs::canonicalize(path).map_err(|e| {
            SyncError::Invalid(format!("folder {} cannot be opened: {e}", path.display()))
        })?;
        if !canonical_roots.iter().any(|root| folder.starts_with(root)) {
            return Err(outside());
        }
        if !folder.is_dir() {
            return Err(SyncError::Invalid(format!(
                "folder {} is not a directory",
                path.display()
            )));
        }
        Ok(Self { folder, patterns })
    }

    /// The canonical directory this origin walks.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The file an external id names, checked to be a regular file still inside the folder
    /// (a link may have changed since the listing).
    async fn resolve(&self, external_id: &str) -> Result<PathBuf, SyncError> {
        let not_ours =
            || SyncError::Origin(format!("{external_id:?} is not an item of this folder"));
        let mut path = self.folder.clone();
        for part in external_id.split('/') {
            if part.is_empty() || part.starts_with('.') || part.contains('\\') {
                return Err(not_ours());
            }
            path.push(part);
        }
        let canonical = tokio::fs::canonicalize(&path)
            .await
            .map_err(|e| read_error(&path, &e))?;
        if !canonical.starts_with(&self.folder) {
            return Err(not_ours());
        }
        let metadata = tokio::fs::metadata(&canonical)
            .await
            .map_err(|e| read_error(&path, &e))?;
        if !metadata.is_file() {
            return Err(not_ours());
        }
        Ok(canonical)
    }
}

#[async_trait]
impl Origin for FolderOrigin {
    async fn list(&self) -> Result<Vec<Item>, SyncError> {
        let folder = self.folder.clone();
        let patterns = self.patterns.clone();
        tokio::task::spawn_blocking(move || walk(&folder, &patterns))
            .await
            .map_err(|e| SyncError::Origin(format!("the folder walk failed: {e}")))?
    }

    async fn open(
        &self,
        item: &Item,
    ) -> Result<BoxStream<'static, Result<Bytes, SyncError>>, SyncError> {
        let path = self.resolve(&item.external_id).await?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| read_error(&path, &e))?;
        let stream = futures_util::stream::try_unfold((file, path), |(mut file, path)| async {
            let mut buf = BytesMut::with_capacity(CHUNK_BYTES);
            let n = file
                .read_buf(&mut buf)
                .await
                .map_err(|e| read_error(&path, &e))?;
            Ok((n > 0).then(|| (buf.freeze(), (file, path))))
        });
        Ok(stream.boxed())
    }
}

/// Walks `folder` (canonical): regular files the patterns take, in external-id order. Any
/// directory that cannot be read fails the walk: leaving it out would make its files look
/// deleted.
fn walk(folder: &Path, patterns: &Patterns) -> Result<Vec<Item>, SyncError> {
    let mut items = Vec::new();
    let mut visited = HashSet::new();
    // Directories reached through links wait until the real ones are walked, so a linked
    // directory is listed under its own path rather than under the alias.
    let mut real: Vec<(PathBuf, String)> = vec![(folder.to_path_buf(), String::new())];
    let mut linked: Vec<(PathBuf, String)> = Vec::new();
    while let Some((dir, relative)) = real.pop().or_else(|| linked.pop()) {
        // Two links to one directory may both have been queued before it was walked.
        if !visited.insert(dir.clone()) {
            continue;
        }
        let mut entries = fs::read_dir(&dir)
            .map_err(|e| read_error(&dir, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| read_error(&dir, &e))?;
        entries.sort_by_key(fs::DirEntry::file_name);
        // Pushed in reverse so the stack pops them in name order.
        for entry in entries.into_iter().rev() {
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str() else {
                tracing::debug!(path = %entry.path().display(), "skipped: the name is not UTF-8");
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let external_id = if relative.is_empty() {
                name.to_owned()
            } else {
                format!("{relative}/{name}")
            };
            let path = entry.path();
            let Some((target, metadata, is_link)) = inspect(folder, &path)? else {
                continue;
            };
            if metadata.is_dir() {
                if visited.contains(&target) {
                    tracing::debug!(path = %path.display(), "skipped: directory already walked");
                } else if is_link {
                    linked.push((target, external_id));
                } else {
                    real.push((target, external_id));
                }
            } else if metadata.is_file() && patterns.takes(&external_id) {
                items.push(file_item(external_id, name, &metadata));
            }
        }
    }
    items.sort_by(|a, b| a.external_id.cmp(&b.external_id));
    Ok(items)
}

/// What an entry is: its canonical path, its metadata (of the target, for a link) and whether
/// it is a link; `None` when it is skipped (gone, a broken link, or a link leaving the folder).
fn inspect(folder: &Path, path: &Path) -> Result<Option<(PathBuf, Metadata, bool)>, SyncError> {
    let own = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        // Deleted since the directory was read: simply not there.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_error(path, &e)),
    };
    if !own.file_type().is_symlink() {
        // Under a canonical directory, a name that is no link is canonical too.
        return Ok(Some((path.to_path_buf(), own, false)));
    }
    let target = match fs::canonicalize(path) {
        Ok(target) => target,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "skipped: broken symbolic link");
            return Ok(None);
        }
    };
    if !target.starts_with(folder) {
        tracing::debug!(
            path = %path.display(),
            target = %target.display(),
            "skipped: the symbolic link leaves the folder"
        );
        return Ok(None);
    }
    match fs::metadata(&target) {
        Ok(metadata) => Ok(Some((target, metadata, true))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(read_error(path, &e)),
    }
}

fn file_item(external_id: String, name: &str, metadata: &Metadata) -> Item {
    let size = metadata.len();
    let modified = metadata.modified().ok().map(DateTime::<Utc>::from);
    let mut fields = serde_json::Map::new();
    if let Some(time) = modified {
        fields.insert(
            MODIFIED_AT.to_owned(),
            time.to_rfc3339_opts(SecondsFormat::AutoSi, true).into(),
        );
    }
    Item {
        external_id,
        name: name.to_owned(),
        fingerprint: size_mtime_fingerprint(size, modified),
        size,
        modified,
        metadata: fields,
    }
}

fn read_error(path: &Path, e: &io::Error) -> SyncError {
    SyncError::Origin(format!("cannot read {}: {e}", path.display()))
}

/// `path` with `.` and `..` resolved lexically (links are not looked at).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[path = "folder_tests.rs"]
mod tests;
