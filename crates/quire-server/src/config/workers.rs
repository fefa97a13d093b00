//! `[workers]`: background processing of uploaded documents.

use serde::{Deserialize, Serialize};

/// `[workers]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// Documents processed at the same time (0 disables processing in this process). With the
    /// local model on ONNX Runtime, also its sessions, at most one per core: on 2 cores the
    /// default of 3 runs 2 sessions, and the third worker parses and stores while the other two
    /// embed, so the model does not wait for them.
    pub count: usize,
    /// How often idle workers look for jobs, in milliseconds.
    pub poll_interval_ms: u64,
    /// How long a job stays leased to its worker, in seconds; the worker renews the lease every
    /// third of that while it works, so only a job whose worker died or hung runs out of it and
    /// is taken up again, by any node, within one lease.
    pub lease_seconds: u64,
    /// Claims of one document (crashes included) before it is failed.
    pub max_attempts: u32,
    /// Longest time spent parsing one document, in seconds.
    pub time_budget_seconds: u64,
    /// Longest time spent on one document after parsing (screening, embedding, indexing), in
    /// seconds; a document that takes longer fails with the reason.
    pub index_time_budget_seconds: u64,
    /// How long shutdown waits for running jobs, in seconds.
    pub shutdown_grace_seconds: u64,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            count: 3,
            poll_interval_ms: 1000,
            lease_seconds: 30,
            max_attempts: 3,
            time_budget_seconds: 300,
            index_time_budget_seconds: 900,
            shutdown_grace_seconds: 10,
        }
    }
}
