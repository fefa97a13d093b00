//! Validated inputs: values that can only be built through `parse`, so code that holds one never
//! has to check it again.

use std::fmt;

/// Why an input was refused; the message is shown to the client as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

fn has_control_chars(s: &str) -> bool {
    s.chars().any(|c| c.is_control())
}

/// A data source's name: 1 to 200 characters after trimming, no control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceName(String);

impl SourceName {
    /// Longest accepted name, in characters.
    pub const MAX_CHARS: usize = 200;

    /// Trims and validates a name.
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        let name = raw.trim();
        if name.is_empty() {
            return Err(InputError("`name` must not be empty".into()));
        }
        if name.chars().count() > Self::MAX_CHARS {
            return Err(InputError(format!(
                "`name` must be at most {} characters",
                Self::MAX_CHARS
            )));
        }
        if has_control_chars(name) {
            return Err(InputError(
                "`name` must not contain control characters".into(),
            ));
        }
        Ok(Self(name.to_owned()))
    }

    /// The validated name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A data source's description: at most 2000 characters (may be empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceDescription(String);

impl SourceDescription {
    /// Longest accepted description, in characters.
    pub const MAX_CHARS: usize = 2000;

    /// Trims and validates a description.
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        let text = raw.trim();
        if text.chars().count() > Self::MAX_CHARS {
            return Err(InputError(format!(
                "`description` must be at most {} characters",
                Self::MAX_CHARS
            )));
        }
        Ok(Self(text.to_owned()))
    }

    /// The validated description.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The kind of a data source: `network` (the spec's, filled by uploads) or one that syncs from
/// an origin (issue 35).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceType {
    /// Documents uploaded over the network API.
    #[default]
    Network,
    /// A directory on the server, synced into the source.
    Folder,
    /// An S3-compatible bucket prefix, synced into the source.
    S3,
    /// A web site (a sitemap, or the pages linked from a start page), synced into the source.
    Web,
}

impl SourceType {
    /// Parses the wire name.
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        match raw {
            "network" => Ok(Self::Network),
            "folder" => Ok(Self::Folder),
            "s3" => Ok(Self::S3),
            "web" => Ok(Self::Web),
            other => Err(InputError(format!(
                "unknown source `type` {other:?}; expected \"network\", \"folder\", \"s3\" or \"web\""
            ))),
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::Folder => "folder",
            Self::S3 => "s3",
            Self::Web => "web",
        }
    }

    /// Whether sources of this type fill themselves from an origin (and need a `sync`).
    pub fn syncs(self) -> bool {
        !matches!(self, Self::Network)
    }
}

impl fmt::Display for SourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A search query: not blank, at most 4000 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery(String);

impl SearchQuery {
    /// Longest accepted query, in characters.
    pub const MAX_CHARS: usize = 4000;

    /// Validates a query; surrounding whitespace is dropped.
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        let text = raw.trim();
        if text.is_empty() {
            return Err(InputError("`query` must not be empty or blank".into()));
        }
        if text.chars().count() > Self::MAX_CHARS {
            return Err(InputError(format!(
                "`query` must be at most {} characters",
                Self::MAX_CHARS
            )));
        }
        Ok(Self(text.to_owned()))
    }

    /// The validated query text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How many search results to return: 1 to 100, default 10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimit(usize);

impl SearchLimit {
    /// The limit when the request gives none.
    pub const DEFAULT: SearchLimit = SearchLimit(10);
    /// The largest accepted limit.
    pub const MAX: usize = 100;

    /// Validates a requested limit.
    pub fn parse(raw: i64) -> Result<Self, InputError> {
        if (1..=Self::MAX as i64).contains(&raw) {
            Ok(Self(raw as usize))
        } else {
            Err(InputError(format!(
                "`limit` must be between 1 and {}, got {raw}",
                Self::MAX
            )))
        }
    }

    /// The limit as a count.
    pub fn get(self) -> usize {
        self.0
    }
}

impl Default for SearchLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_names_are_trimmed_and_bounded() {
        assert_eq!(SourceName::parse("  Manuals ").unwrap().as_str(), "Manuals");
        assert!(SourceName::parse("   ").is_err());
        assert!(SourceName::parse(&"x".repeat(201)).is_err());
        assert!(SourceName::parse("a\u{0}b").is_err());
    }

    #[test]
    fn queries_must_have_content() {
        assert!(SearchQuery::parse(" \t\n").is_err());
        assert_eq!(SearchQuery::parse(" pump ").unwrap().as_str(), "pump");
        assert!(SearchQuery::parse(&"é".repeat(4001)).is_err());
        assert!(SearchQuery::parse(&"é".repeat(4000)).is_ok());
    }

    #[test]
    fn limits_are_bounded() {
        assert!(SearchLimit::parse(0).is_err());
        assert!(SearchLimit::parse(101).is_err());
        assert!(SearchLimit::parse(-3).is_err());
        assert_eq!(SearchLimit::parse(100).unwrap().get(), 100);
        assert_eq!(SearchLimit::default().get(), 10);
    }

    #[test]
    fn source_types_are_network_folder_s3_and_web() {
        for kind in [
            SourceType::Network,
            SourceType::Folder,
            SourceType::S3,
            SourceType::Web,
        ] {
            assert_eq!(SourceType::parse(kind.as_str()).unwrap(), kind);
        }
        assert!(!SourceType::Network.syncs() && SourceType::Folder.syncs());
        assert!(SourceType::Web.syncs());
        let unknown = SourceType::parse("ftp").unwrap_err().0;
        assert!(
            unknown.contains("network") && unknown.contains("web"),
            "{unknown}"
        );
    }
}
