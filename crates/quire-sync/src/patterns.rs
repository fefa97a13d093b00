//! Which items of an origin a source takes: include and exclude globs over external ids.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::SyncError;

/// Include/exclude glob patterns over external ids (globset, `**` allowed, literal separator
/// `/`). An item is taken when it matches some include pattern (none given: every item) and
/// no exclude pattern.
#[derive(Debug, Clone)]
pub struct Patterns {
    include: Option<GlobSet>,
    exclude: GlobSet,
}

impl Patterns {
    /// Compiles the patterns; a malformed one is [`SyncError::Invalid`] naming it.
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, SyncError> {
        let include = if include.is_empty() {
            None
        } else {
            Some(set(include, "include")?)
        };
        Ok(Self {
            include,
            exclude: set(exclude, "exclude")?,
        })
    }

    /// Patterns that take every item.
    pub fn all() -> Self {
        Self {
            include: None,
            exclude: GlobSet::empty(),
        }
    }

    /// Whether the item with this external id is taken.
    pub fn takes(&self, external_id: &str) -> bool {
        self.include
            .as_ref()
            .is_none_or(|include| include.is_match(external_id))
            && !self.exclude.is_match(external_id)
    }
}

fn set(patterns: &[String], kind: &str) -> Result<GlobSet, SyncError> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        builder.add(glob(pattern).map_err(|e| {
            SyncError::Invalid(format!("bad {kind} pattern {pattern:?}: {}", e.kind()))
        })?);
    }
    builder
        .build()
        .map_err(|e| SyncError::Invalid(format!("bad {kind} patterns: {e}")))
}

fn glob(pattern: &str) -> Result<Glob, globset::Error> {
    // `*` stays within one path component; `**` crosses them.
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(include: &[&str], exclude: &[&str]) -> Patterns {
        let owned = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Patterns::new(&owned(include), &owned(exclude)).unwrap()
    }

    #[test]
    fn no_include_takes_every_item() {
        let all = patterns(&[], &[]);
        assert!(all.takes("a.pdf"));
        assert!(all.takes("deep/down/b.txt"));
        assert!(Patterns::all().takes("x/y"));
    }

    #[test]
    fn include_star_stays_in_one_component_and_double_star_crosses() {
        let top = patterns(&["*.pdf"], &[]);
        assert!(top.takes("q1.pdf"));
        assert!(!top.takes("reports/q1.pdf"));
        assert!(!top.takes("q1.txt"));

        let anywhere = patterns(&["**/*.pdf"], &[]);
        assert!(anywhere.takes("q1.pdf"));
        assert!(anywhere.takes("reports/2024/q1.pdf"));

        let under = patterns(&["reports/**"], &[]);
        assert!(under.takes("reports/q1.pdf"));
        assert!(under.takes("reports/2024/q1.pdf"));
        assert!(!under.takes("other/q1.pdf"));
    }

    #[test]
    fn exclude_wins_over_include() {
        let p = patterns(&["**/*.pdf", "**/*.md"], &["drafts/**", "**/*.tmp.pdf"]);
        assert!(p.takes("reports/q1.pdf"));
        assert!(p.takes("notes.md"));
        assert!(!p.takes("drafts/q1.pdf"));
        assert!(!p.takes("reports/q1.tmp.pdf"));
        assert!(!p.takes("image.png"));

        let only_exclude = patterns(&[], &["**/*.log"]);
        assert!(only_exclude.takes("a/b.txt"));
        assert!(!only_exclude.takes("a/b.log"));
    }

    #[test]
    fn a_bad_pattern_is_invalid_and_named() {
        let err = Patterns::new(&["ok/**".into()], &["broken[".into()]).unwrap_err();
        match err {
            SyncError::Invalid(message) => {
                assert!(message.contains("exclude"), "{message}");
                assert!(message.contains("broken["), "{message}");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
}
