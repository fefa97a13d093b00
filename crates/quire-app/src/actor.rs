//! Who acts: every use case that changes state takes an [`Actor`], applies its scope and
//! policies, and writes the audit entry itself, so an action is checked and recorded the same
//! way whichever adapter it came through.

use quire_core::{ApiKeyRecord, KeyId, Permission, SourceId, SourceScope};

/// The one scope that sees everything, for actors that are not limited to some sources.
static EVERY_SOURCE: SourceScope = SourceScope::All;

/// Who performs an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A request authenticated by an API key (the REST API or MCP).
    Key {
        /// The key's id.
        id: KeyId,
        /// The key's label.
        name: String,
        /// The sources the key sees.
        scope: SourceScope,
        /// What the key may do.
        permission: Permission,
    },
    /// The signed-in administrator of the web interface.
    Admin,
    /// Whoever runs a `quire` command on the server (the CLI).
    Operator,
    /// The sync of a source, bringing its origin's changes in.
    Sync {
        /// The source that syncs.
        source: SourceId,
    },
}

impl Actor {
    /// The actor of a request made with `key`.
    pub fn key(key: &ApiKeyRecord) -> Self {
        Self::Key {
            id: key.id,
            name: key.name.clone(),
            scope: key.scope.clone(),
            permission: key.permission,
        }
    }

    /// Whether this actor may administer the instance: an admin key, the administrator, the
    /// operator.
    pub fn is_admin(&self) -> bool {
        match self {
            Self::Key { permission, .. } => *permission == Permission::Admin,
            Self::Admin | Self::Operator => true,
            Self::Sync { .. } => false,
        }
    }

    /// The sources this actor may see and change: a key's scope; every source for the
    /// administrator and the operator.
    pub fn scope(&self) -> &SourceScope {
        match self {
            Self::Key { scope, .. } => scope,
            Self::Admin | Self::Operator | Self::Sync { .. } => &EVERY_SOURCE,
        }
    }
}

/// How the audit log names the actor: `key <name> (<id>)`, `admin` or `operator`.
impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key { id, name, .. } => write!(f, "key {name} ({id})"),
            Self::Admin => f.write_str("admin"),
            Self::Operator => f.write_str("operator"),
            Self::Sync { source } => write!(f, "sync of source {source}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keys_are_limited_to_their_scope() {
        let scoped = SourceScope::only([quire_core::SourceId::new()]);
        let key = Actor::Key {
            id: KeyId::new(),
            name: "ci".into(),
            scope: scoped.clone(),
            permission: Permission::Read,
        };
        assert_eq!(key.scope(), &scoped);
        assert_eq!(Actor::Admin.scope(), &SourceScope::All);
        assert_eq!(Actor::Operator.scope(), &SourceScope::All);
        assert!(key.to_string().starts_with("key ci ("));
        assert_eq!(Actor::Operator.to_string(), "operator");
    }
}
