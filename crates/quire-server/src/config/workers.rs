//! `[workers]`: background processing of uploaded documents.

use serde::{Deserialize, Serialize};

/// `[workers]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// Documents processed at the same time (0 disables processing in this process).
    pub count: usize,
    /// How often idle workers look for jobs, in milliseconds.
    pub poll_interval_ms: u64,
    /// How long a job stays leased to its worker, in seconds; a job whose lease runs out is
    /// taken up again.
    pub lease_seconds: u64,
    /// Claims of one document (crashes included) before it is failed.
    pub max_attempts: u32,
    /// Longest time spent processing one document, in seconds.
    pub time_budget_seconds: u64,
    /// How long shutdown waits for running jobs, in seconds.
    pub shutdown_grace_seconds: u64,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            count: 2,
            poll_interval_ms: 1000,
            lease_seconds: 600,
            max_attempts: 3,
            time_budget_seconds: 300,
            shutdown_grace_seconds: 10,
        }
    }
}
