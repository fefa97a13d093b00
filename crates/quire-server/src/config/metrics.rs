//! `[metrics]`: the Prometheus endpoint, on a listener of its own.
//!
//! Off by default. The endpoint has no authentication (scrapers rarely send any), and what it
//! shows (request rates per route, queue lengths, documents per status, database pool use)
//! tells an outsider how the service is used and when it is busy: so it listens on loopback
//! unless `metrics.allow_non_loopback` says the address is protected some other way (a
//! private network, a firewall, a proxy that authenticates the scraper).

use std::net::SocketAddr;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// `[metrics]`: where Prometheus scrapes `/metrics`, if anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address of the metrics listener (`127.0.0.1:9464`); unset: no metrics endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// Accept a `bind` address other than loopback. The endpoint is unauthenticated: only
    /// set this when the network in front of it keeps strangers out.
    pub allow_non_loopback: bool,
}

impl MetricsConfig {
    /// The address to listen on, when metrics are on.
    pub fn address(&self) -> anyhow::Result<Option<SocketAddr>> {
        let Some(bind) = &self.bind else {
            return Ok(None);
        };
        let address: SocketAddr = bind.parse().with_context(|| {
            format!("metrics.bind must be an IP address and port, not {bind:?}")
        })?;
        if !address.ip().is_loopback() && !self.allow_non_loopback {
            bail!(
                "metrics.bind = {bind:?} is not a loopback address: the metrics endpoint has no \
                 authentication, so it listens on loopback unless metrics.allow_non_loopback = \
                 true says the network keeps strangers out"
            );
        }
        Ok(Some(address))
    }

    /// Refuses settings the service cannot work with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        self.address().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::load;

    #[test]
    fn metrics_are_off_by_default_and_loopback_when_on() {
        assert_eq!(load(&[]).unwrap().metrics.address().unwrap(), None);
        let on = load(&[("QUIRE_METRICS_BIND", "127.0.0.1:9464")]).unwrap();
        assert_eq!(
            on.metrics.address().unwrap(),
            Some("127.0.0.1:9464".parse().unwrap())
        );
        assert!(load(&[("QUIRE_METRICS_BIND", "[::1]:9464")]).is_ok());
    }

    #[test]
    fn a_public_address_needs_an_explicit_yes() {
        let err = load(&[("QUIRE_METRICS_BIND", "0.0.0.0:9464")]).unwrap_err();
        assert!(format!("{err:#}").contains("allow_non_loopback"), "{err:#}");
        let allowed = load(&[
            ("QUIRE_METRICS_BIND", "0.0.0.0:9464"),
            ("QUIRE_METRICS_ALLOW_NON_LOOPBACK", "true"),
        ])
        .unwrap();
        assert!(allowed.metrics.address().unwrap().is_some());
        assert!(load(&[("QUIRE_METRICS_BIND", "localhost:x")]).is_err());
    }
}
