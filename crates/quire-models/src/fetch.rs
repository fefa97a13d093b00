//! Downloads a sentence-transformers model directory from the model hub (or a mirror of it)
//! into the local model cache: what `quire model fetch` runs. Each file is written under a
//! temporary name and renamed only once it is complete and, where its SHA-256 is known,
//! verified, so an interrupted or tampered download never leaves a file the embedder would
//! load.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::ModelError;
use crate::http::{build, client_builder, excerpt, transport_error};

/// The public model hub; mirrors expose the same `/{repo}/resolve/{revision}/{file}` paths.
pub const DEFAULT_HUB_URL: &str = "https://huggingface.co";

/// Environment variable that replaces [`DEFAULT_HUB_URL`], for mirrors.
pub const HUB_URL_ENV: &str = "QUIRE_MODEL_HUB_URL";

/// Environment variable that moves the model cache (shared with `scripts/fetch-model`).
pub const MODEL_CACHE_ENV: &str = "QUIRE_MODEL_CACHE";

/// The default embedding model's repository on the hub.
pub const DEFAULT_MODEL: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// SHA-256 of the default model's `model.safetensors`: the file `scripts/fetch-model` checks
/// too, so both routes install the same weights whatever the hub's `main` points to later.
pub const DEFAULT_MODEL_WEIGHTS_SHA256: &str =
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

/// One file of a model repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    /// Its name in the repository and in the model directory.
    pub name: String,
    /// Lower-case hex SHA-256 the download must have, when known.
    pub sha256: Option<String>,
    /// Whether the model cannot be loaded without it; a missing optional file is skipped.
    pub required: bool,
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchOutcome {
    /// It was downloaded (and verified, when its hash is known).
    Downloaded,
    /// A complete copy was already there (matching the hash, when known), so it was kept.
    AlreadyPresent,
    /// The repository has no such optional file.
    NotOnHub,
}

/// The result for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedFile {
    /// The file's name.
    pub name: String,
    /// Downloaded, kept or absent.
    pub outcome: FetchOutcome,
    /// Its size (0 when absent).
    pub bytes: u64,
    /// Its SHA-256, lower-case hex (empty when absent).
    pub sha256: String,
}

/// A model download: which repository, from where, into which directory.
#[derive(Debug, Clone)]
pub struct ModelFetch {
    /// The hub or a mirror, without a trailing path: [`DEFAULT_HUB_URL`] by default.
    pub hub_url: String,
    /// `owner/name` on the hub.
    pub repo: String,
    /// Branch, tag or commit: `main` by default.
    pub revision: String,
    /// The model directory the files end up in (created when missing).
    pub dir: PathBuf,
    /// The files to fetch, in order.
    pub files: Vec<HubFile>,
    /// Longest silence while waiting for bytes; a slow but steady download is never cut.
    pub read_timeout: Duration,
}

impl ModelFetch {
    /// Fetches the files a sentence-transformers model needs here ([`model_files`]) from
    /// [`DEFAULT_HUB_URL`] at `main` into `dir`.
    pub fn new(repo: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        let repo = repo.into();
        Self {
            hub_url: DEFAULT_HUB_URL.to_owned(),
            files: model_files(&repo),
            repo,
            revision: "main".to_owned(),
            dir: dir.into(),
            read_timeout: Duration::from_secs(30),
        }
    }

    /// Where `file` is downloaded from: `{hub_url}/{repo}/resolve/{revision}/{file}`.
    pub fn file_url(&self, file: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{file}",
            self.hub_url.trim_end_matches('/'),
            self.repo,
            self.revision
        )
    }

    /// Fetches every file that is not already complete, one after another.
    pub async fn run(&self) -> Result<Vec<FetchedFile>, ModelError> {
        if !self.hub_url.starts_with("http://") && !self.hub_url.starts_with("https://") {
            return Err(ModelError::Settings(format!(
                "hub URL {:?} must start with http:// or https://",
                self.hub_url
            )));
        }
        let created = !tokio::fs::try_exists(&self.dir).await.unwrap_or(true);
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|source| ModelError::File {
                path: self.dir.clone(),
                source,
            })?;
        let result = self.fetch_all().await;
        if result.is_err() && created {
            // A failed first fetch leaves no empty model directory behind to confuse the next
            // look at the cache (`remove_dir` keeps a directory that has files).
            let _ = tokio::fs::remove_dir(&self.dir).await;
        }
        result
    }

    async fn fetch_all(&self) -> Result<Vec<FetchedFile>, ModelError> {
        let client = build(client_builder(self.read_timeout).read_timeout(self.read_timeout))?;
        let mut fetched = Vec::with_capacity(self.files.len());
        for file in &self.files {
            fetched.push(self.fetch_file(&client, file).await?);
        }
        Ok(fetched)
    }

    async fn fetch_file(
        &self,
        client: &reqwest::Client,
        file: &HubFile,
    ) -> Result<FetchedFile, ModelError> {
        let path = self.dir.join(&file.name);
        if let Some((bytes, sha256)) = existing(&path).await?
            && file.sha256.as_deref().is_none_or(|want| want == sha256)
        {
            return Ok(FetchedFile {
                name: file.name.clone(),
                outcome: FetchOutcome::AlreadyPresent,
                bytes,
                sha256,
            });
        }
        let url = self.file_url(&file.name);
        let response = client
            .get(&url)
            .send()
            .await
            .map_err(|e| transport_error(&url, &e, self.read_timeout))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && !file.required {
            return Ok(FetchedFile {
                name: file.name.clone(),
                outcome: FetchOutcome::NotOnHub,
                bytes: 0,
                sha256: String::new(),
            });
        }
        if !status.is_success() {
            let body = response.bytes().await.unwrap_or_default();
            let hint = match status.as_u16() {
                // The hub answers 401, not 404, for a repository that does not exist.
                401 | 403 | 404 => " (is the repository name right, and the model public?)",
                _ => "",
            };
            return Err(ModelError::Remote {
                url,
                status: status.as_u16(),
                message: format!("{}{hint}", excerpt(&body)),
            });
        }
        // Beside the file, in its own folder (`1_Pooling/config.json` has one).
        let folder = path.parent().unwrap_or(&self.dir);
        tokio::fs::create_dir_all(folder)
            .await
            .map_err(|source| ModelError::File {
                path: folder.to_path_buf(),
                source,
            })?;
        let base = path.file_name().map_or_else(
            || file.name.clone(),
            |name| name.to_string_lossy().into_owned(),
        );
        let partial = folder.join(format!(".{base}.{}.partial", std::process::id()));
        let written = self.write_partial(response, &url, &partial).await;
        let (bytes, sha256) = match written {
            Ok(done) => done,
            Err(e) => {
                let _ = tokio::fs::remove_file(&partial).await;
                return Err(e);
            }
        };
        if let Some(expected) = &file.sha256
            && *expected != sha256
        {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(ModelError::Checksum {
                file: file.name.clone(),
                url,
                expected: expected.clone(),
                actual: sha256,
            });
        }
        tokio::fs::rename(&partial, &path)
            .await
            .map_err(|source| ModelError::File {
                path: path.clone(),
                source,
            })?;
        Ok(FetchedFile {
            name: file.name.clone(),
            outcome: FetchOutcome::Downloaded,
            bytes,
            sha256,
        })
    }

    /// Streams the body into `partial`, hashing as it goes, and flushes it to disk; fails when
    /// the body ends before its announced length.
    async fn write_partial(
        &self,
        mut response: reqwest::Response,
        url: &str,
        partial: &Path,
    ) -> Result<(u64, String), ModelError> {
        let io = |source| ModelError::File {
            path: partial.to_owned(),
            source,
        };
        let announced = response.content_length();
        let mut out = tokio::fs::File::create(partial).await.map_err(io)?;
        let mut hasher = Sha256::new();
        let mut bytes = 0u64;
        loop {
            let chunk = response.chunk().await.map_err(|e| {
                if e.is_timeout() {
                    transport_error(url, &e, self.read_timeout)
                } else {
                    ModelError::Protocol {
                        url: url.to_owned(),
                        message: format!("the download broke off after {bytes} bytes ({e})"),
                    }
                }
            })?;
            let Some(chunk) = chunk else { break };
            hasher.update(&chunk);
            out.write_all(&chunk).await.map_err(io)?;
            bytes += chunk.len() as u64;
        }
        if let Some(announced) = announced
            && announced != bytes
        {
            return Err(ModelError::Protocol {
                url: url.to_owned(),
                message: format!("the download ended after {bytes} of {announced} bytes"),
            });
        }
        out.sync_all().await.map_err(io)?;
        Ok((bytes, hex::encode(hasher.finalize())))
    }
}

/// The files of a sentence-transformers repository that Quire uses: the configuration, the
/// vocabulary and the weights are required; `tokenizer.json` and the sentence-transformers
/// files (`sentence_bert_config.json` for the window and casing, `modules.json` and
/// `1_Pooling/config.json` for the pooling and normalisation, `config_sentence_transformers.json`
/// for the prompts; see [`crate::sentence`]) are taken when the repository has them. The
/// weights' hash is pinned for [`DEFAULT_MODEL`].
pub fn model_files(repo: &str) -> Vec<HubFile> {
    let file = |name: &str, required: bool| HubFile {
        name: name.to_owned(),
        sha256: None,
        required,
    };
    vec![
        file("config.json", true),
        file("vocab.txt", true),
        file("tokenizer.json", false),
        file("sentence_bert_config.json", false),
        file("modules.json", false),
        file("1_Pooling/config.json", false),
        file("config_sentence_transformers.json", false),
        HubFile {
            sha256: (repo == DEFAULT_MODEL).then(|| DEFAULT_MODEL_WEIGHTS_SHA256.to_owned()),
            ..file("model.safetensors", true)
        },
    ]
}

/// The model cache: `$QUIRE_MODEL_CACHE`, else `~/.cache/quire-models` (where
/// `scripts/fetch-model` puts the default model too); `None` without a home directory.
pub fn model_cache_dir() -> Option<PathBuf> {
    match std::env::var_os(MODEL_CACHE_ENV) {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(|home| PathBuf::from(home).join(".cache").join("quire-models")),
    }
}

/// Size and SHA-256 of the file at `path`, or `None` when there is none.
async fn existing(path: &Path) -> Result<Option<(u64, String)>, ModelError> {
    let io = |source| ModelError::File {
        path: path.to_owned(),
        source,
    };
    let mut file = match tokio::fs::File::open(path).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = tokio::io::AsyncReadExt::read(&mut file, &mut buffer)
            .await
            .map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        bytes += n as u64;
    }
    Ok(Some((bytes, hex::encode(hasher.finalize()))))
}
