//! Permission levels of API keys, ordered from least to most powerful.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What an API key may do. Each level includes the ones below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Permission {
    /// List, get, search and generate.
    Read,
    /// Also create sources, upload and delete documents.
    ReadWrite,
    /// Also manage webhooks.
    Admin,
}

impl Permission {
    /// The wire name: `read`, `read-write` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::ReadWrite => "read-write",
            Self::Admin => "admin",
        }
    }

    /// True when a key of this level may do what `required` demands.
    pub fn allows(self, required: Permission) -> bool {
        self >= required
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not one of the three permission names.
#[derive(Debug, thiserror::Error)]
#[error("unknown permission level {0:?}; expected read, read-write or admin")]
pub struct UnknownPermission(pub String);

impl FromStr for Permission {
    type Err = UnknownPermission;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Self::Read),
            "read-write" => Ok(Self::ReadWrite),
            "admin" => Ok(Self::Admin),
            other => Err(UnknownPermission(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_include_the_ones_below() {
        assert!(Permission::Admin.allows(Permission::ReadWrite));
        assert!(Permission::ReadWrite.allows(Permission::Read));
        assert!(!Permission::Read.allows(Permission::ReadWrite));
        assert!(!Permission::ReadWrite.allows(Permission::Admin));
    }

    #[test]
    fn parses_wire_names_only() {
        assert_eq!(
            "read-write".parse::<Permission>().unwrap(),
            Permission::ReadWrite
        );
        assert!("write".parse::<Permission>().is_err());
        assert!("Admin".parse::<Permission>().is_err());
    }
}
