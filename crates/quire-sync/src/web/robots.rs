//! `robots.txt` (RFC 9309) through the `texting_robots` crate: what this crawler may fetch on
//! one site.

use quire_netguard::Url;
use texting_robots::Robot;

/// The product token rules are matched against (the `User-Agent`'s first word).
pub const AGENT: &str = "Quire";

/// A site's rules for this crawler.
pub enum Robots {
    /// No rules (robots.txt missing, 4xx, or unreadable as rules): everything may be fetched.
    All,
    /// robots.txt could not be fetched (5xx, unreachable): nothing may be, as RFC 9309 asks.
    Nothing(String),
    /// The parsed rules.
    Rules(Box<Robot>),
}

impl Robots {
    /// The rules in a 2xx robots.txt `body`.
    pub fn parse(body: &[u8]) -> Self {
        match Robot::new(AGENT, body) {
            Ok(robot) => Self::Rules(Box::new(robot)),
            // Unparseable rules forbid nothing, as a missing file does.
            Err(_) => Self::All,
        }
    }

    /// `None` when `url` may be fetched, else why not.
    pub fn refuses(&self, url: &Url) -> Option<String> {
        match self {
            Self::All => None,
            Self::Nothing(why) => Some(format!("{why}: nothing on the site is fetched")),
            Self::Rules(robot) => {
                (!robot.allowed(url.as_str())).then(|| format!("{url} is disallowed by robots.txt"))
            }
        }
    }
}

/// Where `url`'s site keeps its robots.txt.
pub fn location(url: &Url) -> Url {
    let mut robots = url.clone();
    robots.set_path("/robots.txt");
    robots.set_query(None);
    robots.set_fragment(None);
    robots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_for_this_agent_and_for_all_are_obeyed() {
        let robots = Robots::parse(
            b"User-agent: *\nDisallow: /private/\n\nUser-agent: Quire\nDisallow: /drafts/\n",
        );
        let url = |p: &str| Url::parse(&format!("https://x.example{p}")).unwrap();
        // A group for this agent replaces the `*` group.
        assert!(robots.refuses(&url("/drafts/a.html")).is_some());
        assert!(robots.refuses(&url("/private/a.html")).is_none());
        assert!(robots.refuses(&url("/guide/a.html")).is_none());
        let star = Robots::parse(b"User-agent: *\nDisallow: /private/\n");
        assert!(
            star.refuses(&url("/private/a.html"))
                .unwrap()
                .contains("robots.txt")
        );
        assert!(Robots::All.refuses(&url("/private/")).is_none());
        assert!(
            Robots::Nothing("robots.txt answered HTTP 503".into())
                .refuses(&url("/"))
                .is_some()
        );
    }

    #[test]
    fn robots_txt_is_at_the_sites_root() {
        let url = Url::parse("https://x.example:8443/a/b?c=d#e").unwrap();
        assert_eq!(location(&url).as_str(), "https://x.example:8443/robots.txt");
    }
}
