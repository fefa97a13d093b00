//! The SSRF guard: which URLs the server may fetch on a user's behalf (a webhook's target, a
//! web source's pages), and which addresses they may reach. The rules live here once, for
//! every crate that fetches.
//!
//! Such a URL is chosen by a user but fetched by the server, so without a guard it could
//! reach the server's own loopback services, the cloud metadata endpoint (169.254.169.254)
//! or the private network. Every resolved address is checked, and the caller connects only
//! to the addresses returned here (quire-webhooks' `deliver`, quire-sync's web fetcher), so
//! a DNS answer that changes between check and connect cannot slip through.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::Host;
pub use url::Url;

/// Why a target is refused.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The text is not an absolute URL.
    #[error("not a valid URL: {0}")]
    InvalidUrl(#[from] url::ParseError),
    /// The URL is not http or https.
    #[error("unsupported scheme `{0}`: targets must be http or https")]
    UnsupportedScheme(String),
    /// The URL names no host.
    #[error("the URL has no host")]
    MissingHost,
    /// The URL embeds `user:password@`; credentials would be stored and logged with it.
    #[error(
        "the URL contains credentials (user:password@), which would be stored and shown with it"
    )]
    Credentials,
    /// The host name could not be resolved.
    #[error("could not resolve {host}: {source}")]
    Resolve {
        /// The host name looked up.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The host name resolved to no address at all.
    #[error("{0} resolves to no address")]
    NoAddresses(String),
    /// An address of the target is internal and private targets are not allowed.
    #[error("{}; set {setting} to allow internal targets", describe_refusal(.host.as_deref(), .address, *.class))]
    Internal {
        /// The host name, or `None` when the URL holds an IP address.
        host: Option<String>,
        /// The refused address.
        address: IpAddr,
        /// What kind of internal address it is.
        class: InternalAddress,
        /// The setting that would allow it (`webhooks.allow_private_targets`, …).
        setting: &'static str,
    },
}

fn describe_refusal(host: Option<&str>, address: &IpAddr, class: InternalAddress) -> String {
    match host {
        Some(host) => format!("{host} resolves to {address}, {class}"),
        None => format!("{address} is {class}"),
    }
}

/// A kind of address the server may not reach on a user's behalf unless private targets are
/// allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalAddress {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16.
    Private,
    /// fc00::/7 (and the deprecated site-local fec0::/10).
    UniqueLocal,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 0.0.0.0, ::.
    Unspecified,
    /// 0.0.0.0/8: "this network".
    ThisNetwork,
    /// 100.64/10, carrier-grade NAT.
    SharedCgnat,
    /// 198.18/15, network benchmarking.
    Benchmarking,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32.
    Documentation,
    /// 255.255.255.255.
    Broadcast,
    /// 224/4, ff00::/8.
    Multicast,
    /// 192.0.0/24, 240/4, 100::/64, and IPv4-compatible IPv6: reserved, never a public server.
    Reserved,
}

impl fmt::Display for InternalAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Loopback => "a loopback address",
            Self::Private => "a private address",
            Self::UniqueLocal => "a unique local (private) IPv6 address",
            Self::LinkLocal => "a link-local address",
            Self::Unspecified => "the unspecified address",
            Self::ThisNetwork => "a \"this network\" address",
            Self::SharedCgnat => "a shared (carrier-grade NAT) address",
            Self::Benchmarking => "a benchmarking address",
            Self::Documentation => "a documentation address",
            Self::Broadcast => "the broadcast address",
            Self::Multicast => "a multicast address",
            Self::Reserved => "a reserved address",
        })
    }
}

/// Parses a target URL: absolute, http or https, with a host and without credentials.
pub fn check_url(raw: &str) -> Result<Url, TargetError> {
    let url = Url::parse(raw.trim())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(TargetError::UnsupportedScheme(url.scheme().to_owned()));
    }
    if url.host().is_none() {
        return Err(TargetError::MissingHost);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(TargetError::Credentials);
    }
    Ok(url)
}

/// What one kind of fetch may reach: internal addresses or not, and the setting that decides
/// it (named in refusals, so an operator knows what to change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// Whether internal addresses are allowed.
    pub allow_private: bool,
    /// The setting that allows them (`webhooks.allow_private_targets`, …).
    pub setting: &'static str,
}

impl Guard {
    /// Resolves the URL's host (IP literals without DNS) and, unless private targets are
    /// allowed, refuses it when any address is internal. The caller must connect only to the
    /// returned addresses.
    pub async fn resolve(&self, url: &Url) -> Result<Vec<SocketAddr>, TargetError> {
        let port = url
            .port_or_known_default()
            .ok_or_else(|| TargetError::UnsupportedScheme(url.scheme().to_owned()))?;
        let (host, addresses) = match url.host().ok_or(TargetError::MissingHost)? {
            Host::Ipv4(ip) => (None, vec![SocketAddr::new(ip.into(), port)]),
            Host::Ipv6(ip) => (None, vec![SocketAddr::new(ip.into(), port)]),
            Host::Domain(domain) => {
                let resolved: Vec<SocketAddr> = tokio::net::lookup_host((domain, port))
                    .await
                    .map_err(|source| TargetError::Resolve {
                        host: domain.to_owned(),
                        source,
                    })?
                    .collect();
                if resolved.is_empty() {
                    return Err(TargetError::NoAddresses(domain.to_owned()));
                }
                (Some(domain.to_owned()), resolved)
            }
        };
        if !self.allow_private {
            // One internal address refuses the whole target: a client may connect to any.
            for address in &addresses {
                if let Some(class) = internal_address(address.ip()) {
                    return Err(TargetError::Internal {
                        host,
                        address: address.ip(),
                        class,
                        setting: self.setting,
                    });
                }
            }
        }
        Ok(addresses)
    }
}

/// The kind of internal address `ip` is, or `None` for a public address.
pub fn internal_address(ip: IpAddr) -> Option<InternalAddress> {
    match ip {
        IpAddr::V4(ip) => internal_v4(ip),
        IpAddr::V6(ip) => internal_v6(ip),
    }
}

fn in_v4_net(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn internal_v4(ip: Ipv4Addr) -> Option<InternalAddress> {
    use InternalAddress::*;
    // Most specific first: 0.0.0.0 is inside 0/8, 255.255.255.255 inside 240/4.
    const NETS: [([u8; 4], u32, InternalAddress); 17] = [
        ([0, 0, 0, 0], 32, Unspecified),
        ([255, 255, 255, 255], 32, Broadcast),
        ([0, 0, 0, 0], 8, ThisNetwork),
        ([127, 0, 0, 0], 8, Loopback),
        ([10, 0, 0, 0], 8, Private),
        ([172, 16, 0, 0], 12, Private),
        ([192, 168, 0, 0], 16, Private),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([100, 64, 0, 0], 10, SharedCgnat),
        ([198, 18, 0, 0], 15, Benchmarking),
        ([192, 0, 2, 0], 24, Documentation),
        ([198, 51, 100, 0], 24, Documentation),
        ([203, 0, 113, 0], 24, Documentation),
        ([224, 0, 0, 0], 4, Multicast),
        ([192, 0, 0, 0], 24, Reserved),
        ([240, 0, 0, 0], 4, Reserved),
        // 6to4 relay anycast: forwards to whatever IPv4 address is embedded.
        ([192, 88, 99, 0], 24, Reserved),
    ];
    NETS.iter()
        .find(|(net, prefix, _)| in_v4_net(ip, *net, *prefix))
        .map(|(_, _, class)| *class)
}

fn internal_v6(ip: Ipv6Addr) -> Option<InternalAddress> {
    use InternalAddress::*;
    let segments = ip.segments();
    if ip.is_unspecified() {
        return Some(Unspecified);
    }
    if ip.is_loopback() {
        return Some(Loopback);
    }
    // Addresses that carry an IPv4 address reach it: judge them by that address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return internal_v4(v4);
    }
    let embedded_v4 = Ipv4Addr::new(
        (segments[6] >> 8) as u8,
        segments[6] as u8,
        (segments[7] >> 8) as u8,
        segments[7] as u8,
    );
    // NAT64 (64:ff9b::/96) translates to the embedded IPv4 address.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return internal_v4(embedded_v4);
    }
    // 6to4 (2002::/16) embeds an IPv4 address in the next 32 bits.
    if segments[0] == 0x2002 {
        let v4 = Ipv4Addr::new(
            (segments[1] >> 8) as u8,
            segments[1] as u8,
            (segments[2] >> 8) as u8,
            segments[2] as u8,
        );
        return internal_v4(v4);
    }
    if segments[..6] == [0; 6] {
        // Deprecated IPv4-compatible addresses (::a.b.c.d).
        return Some(Reserved);
    }
    match segments[0] {
        s if s & 0xfe00 == 0xfc00 => Some(UniqueLocal),
        s if s & 0xffc0 == 0xfec0 => Some(UniqueLocal),
        s if s & 0xffc0 == 0xfe80 => Some(LinkLocal),
        s if s & 0xff00 == 0xff00 => Some(Multicast),
        0x2001 if segments[1] == 0x0db8 => Some(Documentation),
        0x0100 if segments[1..4] == [0, 0, 0] => Some(Reserved),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUARD: Guard = Guard {
        allow_private: false,
        setting: "webhooks.allow_private_targets",
    };
    const OPEN: Guard = Guard {
        allow_private: true,
        setting: "webhooks.allow_private_targets",
    };

    const INTERNAL: [&str; 14] = [
        "http://127.0.0.1/",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[fe80::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "http://100.64.0.1/",
        "http://198.18.0.1/",
        "http://[fd00::1]/",
        // The URL parser normalises numeric hosts: this is 127.0.0.1.
        "http://2130706433/",
        "https://localhost:8443/hook",
    ];

    #[tokio::test]
    async fn internal_targets_are_refused_by_default() {
        for raw in INTERNAL {
            let url = check_url(raw).unwrap();
            let err = GUARD.resolve(&url).await.unwrap_err();
            assert!(
                matches!(err, TargetError::Internal { .. }),
                "{raw}: {err:?}"
            );
            assert!(
                err.to_string()
                    .ends_with("; set webhooks.allow_private_targets to allow internal targets"),
                "{raw}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn internal_targets_are_allowed_with_allow_private() {
        for raw in INTERNAL {
            let url = check_url(raw).unwrap();
            let addresses = OPEN.resolve(&url).await.unwrap();
            assert!(!addresses.is_empty(), "{raw}");
        }
    }

    #[tokio::test]
    async fn refusals_name_the_address_and_the_reason() {
        let url = check_url("http://localhost:9000/").unwrap();
        let message = GUARD.resolve(&url).await.unwrap_err().to_string();
        assert!(
            message
                == "localhost resolves to 127.0.0.1, a loopback address; set webhooks.allow_private_targets to allow internal targets"
                || message
                    == "localhost resolves to ::1, a loopback address; set webhooks.allow_private_targets to allow internal targets",
            "{message}"
        );
        let url = check_url("http://169.254.169.254/").unwrap();
        assert_eq!(
            GUARD.resolve(&url).await.unwrap_err().to_string(),
            "169.254.169.254 is a link-local address; set webhooks.allow_private_targets to allow internal targets"
        );
    }

    #[tokio::test]
    async fn public_literals_pass_without_dns() {
        let url = check_url("https://93.184.216.34/hook").unwrap();
        assert_eq!(
            GUARD.resolve(&url).await.unwrap(),
            vec!["93.184.216.34:443".parse::<SocketAddr>().unwrap()]
        );
        let url = check_url("http://[2606:2800:220:1:248:1893:25c8:1946]:8080/").unwrap();
        assert_eq!(
            GUARD.resolve(&url).await.unwrap(),
            vec![
                "[2606:2800:220:1:248:1893:25c8:1946]:8080"
                    .parse::<SocketAddr>()
                    .unwrap()
            ]
        );
    }

    #[test]
    fn malformed_urls_are_refused() {
        assert!(matches!(
            check_url("ftp://x"),
            Err(TargetError::UnsupportedScheme(scheme)) if scheme == "ftp"
        ));
        assert!(matches!(
            check_url("not a url"),
            Err(TargetError::InvalidUrl(_))
        ));
        assert!(matches!(
            check_url("http://"),
            Err(TargetError::InvalidUrl(_))
        ));
        assert!(matches!(
            check_url("/relative/path"),
            Err(TargetError::InvalidUrl(_))
        ));
        assert!(matches!(
            check_url("file:///etc/passwd"),
            Err(TargetError::UnsupportedScheme(_))
        ));
    }

    #[test]
    fn credentials_in_the_url_are_refused() {
        assert!(matches!(
            check_url("https://user:pass@example.com/hook"),
            Err(TargetError::Credentials)
        ));
        assert!(matches!(
            check_url("https://user@example.com/hook"),
            Err(TargetError::Credentials)
        ));
        assert!(check_url("https://example.com:8443/hook?x=1").is_ok());
    }

    #[test]
    fn addresses_are_classified() {
        let cases = [
            ("127.255.0.1", Some(InternalAddress::Loopback)),
            ("0.1.2.3", Some(InternalAddress::ThisNetwork)),
            ("255.255.255.255", Some(InternalAddress::Broadcast)),
            ("224.0.0.1", Some(InternalAddress::Multicast)),
            ("192.0.2.10", Some(InternalAddress::Documentation)),
            ("198.51.100.10", Some(InternalAddress::Documentation)),
            ("203.0.113.10", Some(InternalAddress::Documentation)),
            ("172.31.255.255", Some(InternalAddress::Private)),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("198.20.0.1", None),
            ("8.8.8.8", None),
            ("::", Some(InternalAddress::Unspecified)),
            ("ff02::1", Some(InternalAddress::Multicast)),
            ("2001:db8::1", Some(InternalAddress::Documentation)),
            ("::ffff:10.0.0.1", Some(InternalAddress::Private)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::7f00:1", Some(InternalAddress::Loopback)),
            ("2002:a9fe:a9fe::", Some(InternalAddress::LinkLocal)),
            ("::127.0.0.1", Some(InternalAddress::Reserved)),
            ("2606:4700:4700::1111", None),
        ];
        for (ip, expected) in cases {
            assert_eq!(internal_address(ip.parse().unwrap()), expected, "{ip}");
        }
    }
}
