//! `[log]`: what the service logs, and in which format.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter such as `info` or `quire=debug,info` (overridden by `RUST_LOG`).
    pub level: String,
    /// `text` or `json`.
    pub format: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info,tantivy=warn".into(),
            format: "text".into(),
        }
    }
}

impl LogConfig {
    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if !matches!(self.format.as_str(), "text" | "json") {
            bail!("log.format must be \"text\" or \"json\"");
        }
        Ok(())
    }
}
