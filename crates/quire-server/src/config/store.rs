//! `[store]`: which database holds metadata, jobs, keys and the outbox.

use quire_core::Secret;
use serde::{Deserialize, Serialize};

/// `[store]`: the database behind the service, chosen at run time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite:///path/to/quire.db` or `postgres://user:password@host/db`; unset: SQLite in
    /// the data directory (`<data_dir>/quire.db`), the embedded default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret<String>>,
}
