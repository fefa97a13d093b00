//! `[webhooks]`: delivery of events to registered webhooks.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// `[webhooks]`: how events are delivered to registered webhooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// Allow targets on loopback, private, link-local and other internal addresses (refused
    /// by default, at registration and again at each delivery).
    pub allow_private_targets: bool,
    /// Longest wait for a receiver's answer, in seconds (the spec's 10). Also sets how long an
    /// event stays claimed (twice this plus 30 s) and how long shutdown waits for deliveries.
    pub timeout_seconds: u64,
    /// Deliveries in flight at once.
    pub concurrency: usize,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            timeout_seconds: 10,
            concurrency: 64,
        }
    }
}

impl WebhooksConfig {
    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.timeout_seconds == 0 || self.concurrency == 0 {
            bail!("webhooks.timeout_seconds and webhooks.concurrency must be at least 1");
        }
        Ok(())
    }
}
