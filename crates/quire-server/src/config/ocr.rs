//! `[ocr]`: reading scanned PDF pages and images with Tesseract, run as a separate program by
//! the parse worker.

use std::path::{Path, PathBuf};

use anyhow::bail;
use quire_ingest::OcrSettings;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Whether OCR runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OcrMode {
    /// On when Tesseract (with the configured languages) is found, off otherwise.
    #[default]
    Auto,
    /// On; the server does not start without a working Tesseract.
    On,
    /// Off: scanned documents and images fail with a reason that says how to turn it on.
    Off,
}

impl Serialize for OcrMode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            Self::Auto => "auto",
            Self::On => "true",
            Self::Off => "false",
        })
    }
}

impl<'de> Deserialize<'de> for OcrMode {
    /// `"auto"`, `true`/`false`, or their spellings as text (environment variables are text).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Text(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Bool(true) => Ok(Self::On),
            Raw::Bool(false) => Ok(Self::Off),
            Raw::Text(text) => match text.trim().to_ascii_lowercase().as_str() {
                "auto" => Ok(Self::Auto),
                "true" | "1" | "yes" | "on" => Ok(Self::On),
                "false" | "0" | "no" | "off" => Ok(Self::Off),
                other => Err(serde::de::Error::custom(format!(
                    "ocr.enabled must be auto, true or false, not {other:?}"
                ))),
            },
        }
    }
}

/// `[ocr]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OcrConfig {
    /// `auto` (on when Tesseract is found), `true` or `false`.
    pub enabled: OcrMode,
    /// Tesseract language codes (`["eng", "deu"]`); in the environment a comma-separated list
    /// (`QUIRE_OCR_LANGUAGES=eng,deu`).
    #[serde(deserialize_with = "languages")]
    pub languages: Vec<String>,
    /// Most pages of one document read by OCR; a document with more fails with a reason.
    pub max_pages: u32,
    /// Longest OCR of one page may take, in seconds.
    pub page_timeout_seconds: u64,
    /// Resolution page images are brought to before recognition (dots per inch).
    pub dpi: u32,
    /// The `tesseract` program; unset, `tesseract` on the `PATH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<PathBuf>,
    /// Tesseract's language data directory (`TESSDATA_PREFIX`); unset, the program's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tessdata_dir: Option<PathBuf>,
}

impl Default for OcrConfig {
    fn default() -> Self {
        Self {
            enabled: OcrMode::Auto,
            languages: vec!["eng".into()],
            max_pages: 200,
            page_timeout_seconds: 60,
            dpi: 300,
            program: None,
            tessdata_dir: None,
        }
    }
}

fn languages<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        List(Vec<String>),
        Text(String),
    }
    let list = match Raw::deserialize(deserializer)? {
        Raw::List(list) => list,
        Raw::Text(text) => text.split([',', '+', ' ']).map(str::to_owned).collect(),
    };
    Ok(list
        .into_iter()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}

impl OcrConfig {
    /// Checks the settings that need no Tesseract to judge.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.languages.is_empty() {
            bail!("ocr.languages must name at least one language (e.g. [\"eng\"])");
        }
        if let Some(bad) = self
            .languages
            .iter()
            .find(|l| !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            bail!(
                "ocr.languages: {bad:?} is not a Tesseract language code (e.g. eng, deu, chi_sim)"
            );
        }
        if self.max_pages == 0 {
            bail!("ocr.max_pages must be at least 1 (set ocr.enabled = false to turn OCR off)");
        }
        if self.page_timeout_seconds == 0 {
            bail!("ocr.page_timeout_seconds must be at least 1");
        }
        if !(70..=1200).contains(&self.dpi) {
            bail!("ocr.dpi must be between 70 and 1200");
        }
        Ok(())
    }

    /// Decides whether OCR is on: `Ok((settings, note))` with `None` settings when it is off,
    /// the note saying why (for the start-up log and the version endpoint). With
    /// `enabled = true` a missing or incomplete Tesseract is an error, so the server does not
    /// start believing it can read scans.
    pub fn resolve(&self) -> anyhow::Result<(Option<OcrSettings>, String)> {
        if self.enabled == OcrMode::Off {
            return Ok((
                None,
                "OCR off (ocr.enabled = false): scanned documents and images fail with a reason"
                    .into(),
            ));
        }
        let program = match &self.program {
            Some(program) => Some(program.clone()),
            None => on_path("tesseract"),
        };
        let probed = match program {
            Some(program) => {
                quire_ingest::probe_ocr(&program, self.tessdata_dir.as_deref(), &self.languages)
                    .map(|found| (program, found))
            }
            None => Err(
                "no tesseract program on the PATH: install it (Debian and Ubuntu: `apt-get \
                 install tesseract-ocr tesseract-ocr-eng`; macOS: `brew install tesseract`; in a \
                 clone of Quire, scripts/ocr-deps), or set ocr.program"
                    .to_owned(),
            ),
        };
        match probed {
            Ok((program, found)) => {
                let note = format!(
                    "OCR on: {} ({}), languages {}, at most {} pages a document, {} dpi",
                    found.version,
                    program.display(),
                    self.languages.join("+"),
                    self.max_pages,
                    self.dpi
                );
                let settings = OcrSettings {
                    program,
                    languages: self.languages.clone(),
                    tessdata_dir: self.tessdata_dir.clone(),
                    max_pages: self.max_pages,
                    page_timeout_seconds: self.page_timeout_seconds,
                    dpi: self.dpi,
                    // Set per document from workers.time_budget_seconds.
                    document_timeout_seconds: 0,
                };
                Ok((Some(settings), note))
            }
            Err(why) if self.enabled == OcrMode::On => {
                bail!("ocr.enabled = true, but OCR cannot run: {why}")
            }
            Err(why) => Ok((
                None,
                format!(
                    "OCR off: {why}; scanned documents and images fail with a reason (install \
                     tesseract-ocr, e.g. scripts/ocr-deps)"
                ),
            )),
        }
    }
}

/// The first executable called `name` in a directory of the `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
