//! Source scopes: which data sources a caller may see. A scope is a parameter of every store
//! and search call that reads documents, so no code path can forget to filter by it.

use std::collections::BTreeSet;

use crate::SourceId;

/// The sources a caller may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceScope {
    /// Every source, including ones created later.
    All,
    /// Only these sources.
    Only(BTreeSet<SourceId>),
}

impl SourceScope {
    /// A scope limited to the given sources.
    pub fn only(ids: impl IntoIterator<Item = SourceId>) -> Self {
        Self::Only(ids.into_iter().collect())
    }

    /// True when the caller may see `source`.
    pub fn allows(&self, source: SourceId) -> bool {
        match self {
            Self::All => true,
            Self::Only(ids) => ids.contains(&source),
        }
    }

    /// Narrows this scope to `requested` (for example a search's `sourceIds`). Returns the ids
    /// outside this scope as the error, so callers can answer 404 for them exactly as for
    /// sources that do not exist.
    pub fn narrow(&self, requested: &[SourceId]) -> Result<SourceScope, Vec<SourceId>> {
        let outside: Vec<SourceId> = requested
            .iter()
            .copied()
            .filter(|id| !self.allows(*id))
            .collect();
        if outside.is_empty() {
            Ok(Self::only(requested.iter().copied()))
        } else {
            Err(outside)
        }
    }

    /// The explicit source list, or `None` for all sources.
    pub fn source_ids(&self) -> Option<&BTreeSet<SourceId>> {
        match self {
            Self::All => None,
            Self::Only(ids) => Some(ids),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_rejects_sources_outside_the_scope() {
        let a = SourceId::new();
        let b = SourceId::new();
        let scope = SourceScope::only([a]);
        assert!(scope.allows(a));
        assert!(!scope.allows(b));
        assert_eq!(scope.narrow(&[a]).unwrap(), SourceScope::only([a]));
        assert_eq!(scope.narrow(&[a, b]).unwrap_err(), vec![b]);
        assert_eq!(
            SourceScope::All.narrow(&[b]).unwrap(),
            SourceScope::only([b])
        );
    }
}
