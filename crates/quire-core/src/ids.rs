//! Typed identifiers. Each wraps a UUID so a document id can never be passed where a source id
//! is expected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh random identifier.
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }

            /// The underlying UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }
    };
}

uuid_id!(
    /// Identifies a data source.
    SourceId
);
uuid_id!(
    /// Identifies a document.
    DocumentId
);
uuid_id!(
    /// Identifies an API key (not the secret itself).
    KeyId
);
uuid_id!(
    /// Identifies a chunk of a document.
    ChunkId
);
uuid_id!(
    /// Identifies a background job.
    JobId
);
uuid_id!(
    /// Identifies a conversation: the answers generated for one API key that follow each other.
    ConversationId
);
uuid_id!(
    /// Identifies one question and its generated answer within a conversation.
    MessageId
);
uuid_id!(
    /// Identifies a registered webhook.
    WebhookId
);
uuid_id!(
    /// Identifies one event recorded for one webhook, sent as `webhook-id`: the same on every
    /// attempt, so receivers can drop a repeat.
    EventId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_strings() {
        let id = SourceId::new();
        let parsed: SourceId = id.to_string().parse().unwrap();
        assert_eq!(id, parsed);
        assert!("not-a-uuid".parse::<SourceId>().is_err());
    }
}
