//! A page's fingerprint: what the next run needs to ask the site whether the page changed
//! (its validators), to tell a change when the site has no validators (the body's SHA-256),
//! and to go on crawling through it when it has not changed (its links), kept as JSON in the
//! store's free-text fingerprint, so no other per-item state is needed.

use serde::{Deserialize, Serialize};

/// The prefix of a web page's fingerprint.
const PREFIX: &str = "web:";

/// What a run learnt about one page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PageState {
    /// The `ETag` it answered with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The `Last-Modified` it answered with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// The sitemap's `<lastmod>` for it when it was fetched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lastmod: Option<String>,
    /// The body's SHA-256, hex.
    pub sha256: String,
    /// The body's size in bytes.
    pub size: u64,
    /// The file name it is uploaded as.
    pub name: String,
    /// The metadata it was uploaded with.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The links it holds that the crawl follows (the source's site only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
}

impl PageState {
    /// The fingerprint text stored for the page.
    pub fn fingerprint(&self) -> String {
        format!(
            "{PREFIX}{}",
            serde_json::to_string(self).expect("a page state serialises")
        )
    }

    /// The state a fingerprint holds; `None` for anything else (another origin's, or an older
    /// format), which makes the next request unconditional.
    pub fn from_fingerprint(fingerprint: &str) -> Option<Self> {
        serde_json::from_str(fingerprint.strip_prefix(PREFIX)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_round_trips_and_is_stable() {
        let state = PageState {
            etag: Some("\"v1\"".into()),
            last_modified: None,
            lastmod: Some("2024-05-01".into()),
            sha256: "ab".repeat(32),
            size: 120,
            name: "pumps.html".into(),
            metadata: serde_json::json!({"title": "Pumps"})
                .as_object()
                .unwrap()
                .clone(),
            links: vec!["https://x.example/a;b".into()],
        };
        let fingerprint = state.fingerprint();
        assert!(fingerprint.starts_with("web:{"), "{fingerprint}");
        assert_eq!(
            PageState::from_fingerprint(&fingerprint),
            Some(state.clone())
        );
        assert_eq!(fingerprint, state.clone().fingerprint());
        assert_eq!(PageState::from_fingerprint("etag:abc"), None);
        assert_eq!(PageState::from_fingerprint("web:not json"), None);
    }
}
