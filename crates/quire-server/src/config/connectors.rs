//! `[connectors]`: what sources that sync may reach (folders, internal addresses), and the key
//! their credentials are sealed with.

use std::path::PathBuf;

use quire_core::Secret;
use serde::{Deserialize, Deserializer, Serialize};

/// `[connectors]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectorsConfig {
    /// Directories `folder` sources may read from (and anything below them); empty by default,
    /// so no folder on the server is readable until an operator names one. In the environment
    /// (`QUIRE_CONNECTORS_FOLDER_ROOTS`), comma-separated.
    #[serde(deserialize_with = "paths")]
    pub folder_roots: Vec<PathBuf>,
    /// Let `web` sources reach loopback, private, link-local and other internal addresses
    /// (refused by default, for every request of a run: redirects, robots.txt and sitemaps
    /// too). In the environment: `QUIRE_CONNECTORS_ALLOW_PRIVATE_TARGETS`.
    pub allow_private_targets: bool,
    /// The key sources' credentials are sealed with: 32 bytes, base64. Unset: a key generated
    /// into `<data_dir>/connectors.key` (owner-only) at the first start. See
    /// docs/operations.md for rotating it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<Secret<String>>,
}

fn paths<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<PathBuf>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        List(Vec<PathBuf>),
        Text(String),
    }
    Ok(match Raw::deserialize(deserializer)? {
        Raw::List(list) => list,
        Raw::Text(text) => text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect(),
    })
}
