//! Where the store lives, chosen at run time from `store.url`: the backend is a value, never a
//! build flag, so one binary runs embedded or as a cluster node.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::{SqliteStore, Store, StoreError, StoreResult};

/// A parsed `store.url`.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// `sqlite://<path>`: one SQLite database file (the embedded default).
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`: a PostgreSQL server shared by every node.
    Postgres(String),
}

impl StoreLocation {
    /// Parses `sqlite://<path>`, `postgres://…` or `postgresql://…`.
    pub fn parse(url: &str) -> StoreResult<Self> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(StoreError::Invalid(
                    "store.url \"sqlite://\" names no file (use sqlite:///path/to/quire.db)"
                        .into(),
                ));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_owned()));
        }
        Err(StoreError::Invalid(format!(
            "store.url {} is neither sqlite://<path> nor postgres://…",
            redact_password(url)
        )))
    }
}

/// Shows the location with any password replaced by `***`, so logs and errors never carry it.
impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Self::Postgres(url) => f.write_str(&redact_password(url)),
        }
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `scheme://user:secret@host/…` → `scheme://user:***@host/…`; anything else unchanged.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Opens the store at `location`, bringing its schema up to date.
pub async fn open(location: &StoreLocation) -> StoreResult<Arc<dyn Store>> {
    match location {
        StoreLocation::Sqlite(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Open(format!("could not create {}: {e}", dir.display()))
                })?;
            }
            Ok(Arc::new(SqliteStore::open(path).await?))
        }
        StoreLocation::Postgres(_) => Err(StoreError::Open(format!(
            "{location}: this build has no PostgreSQL backend yet"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_schemes() {
        assert_eq!(
            StoreLocation::parse("sqlite:///var/lib/quire/quire.db").unwrap(),
            StoreLocation::Sqlite(PathBuf::from("/var/lib/quire/quire.db"))
        );
        assert!(matches!(
            StoreLocation::parse("postgresql://q@db/quire").unwrap(),
            StoreLocation::Postgres(_)
        ));
        assert!(StoreLocation::parse("mysql://db").is_err());
        assert!(StoreLocation::parse("sqlite://").is_err());
    }

    #[test]
    fn never_shows_the_password() {
        let location = StoreLocation::parse("postgres://quire:hunter2@db:5432/quire?x=1").unwrap();
        assert_eq!(location.to_string(), "postgres://quire:***@db:5432/quire?x=1");
        assert_eq!(format!("{location:?}"), "postgres://quire:***@db:5432/quire?x=1");
        let error = StoreLocation::parse("mysql://root:hunter2@db").unwrap_err();
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }
}
