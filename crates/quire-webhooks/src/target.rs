//! The SSRF guard for webhook targets: the shared rules of `quire-netguard`, relaxed only by
//! `webhooks.allow_private_targets`.

use std::net::SocketAddr;

pub use quire_netguard::{InternalAddress, TargetError, Url, check_url, internal_address};

/// The setting that lets webhooks reach internal addresses, named in refusals.
pub const ALLOW_PRIVATE_SETTING: &str = "webhooks.allow_private_targets";

/// Resolves the URL's host and, unless `allow_private`, refuses it when any address is
/// internal. The caller must connect only to the returned addresses.
pub async fn resolve_and_check(
    url: &Url,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, TargetError> {
    quire_netguard::Guard {
        allow_private,
        setting: ALLOW_PRIVATE_SETTING,
    }
    .resolve(url)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refusals_name_the_webhooks_setting() {
        let url = check_url("http://169.254.169.254/").unwrap();
        assert_eq!(
            resolve_and_check(&url, false)
                .await
                .unwrap_err()
                .to_string(),
            "169.254.169.254 is a link-local address; set webhooks.allow_private_targets to allow internal targets"
        );
        assert!(resolve_and_check(&url, true).await.is_ok());
    }
}
