//! Webhook events: what an administrator can subscribe to, and the JSON envelope every
//! delivery carries.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Something that happened to a document and may be announced to webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WebhookEvent {
    /// Processing finished and the document is searchable.
    #[serde(rename = "document.ready")]
    DocumentReady,
    /// Processing failed.
    #[serde(rename = "document.failed")]
    DocumentFailed,
    /// Personal data was found in the document.
    #[serde(rename = "document.pii_detected")]
    DocumentPiiDetected,
    /// The document was deleted, with every version.
    #[serde(rename = "document.deleted")]
    DocumentDeleted,
    /// A syncing source's run ended (succeeded or failed).
    #[serde(rename = "source.synced")]
    SourceSynced,
}

impl WebhookEvent {
    /// Every event, in the order they are documented.
    pub const ALL: [WebhookEvent; 5] = [
        Self::DocumentReady,
        Self::DocumentFailed,
        Self::DocumentPiiDetected,
        Self::DocumentDeleted,
        Self::SourceSynced,
    ];

    /// The wire name, such as `document.ready`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DocumentReady => "document.ready",
            Self::DocumentFailed => "document.failed",
            Self::DocumentPiiDetected => "document.pii_detected",
            Self::DocumentDeleted => "document.deleted",
            Self::SourceSynced => "source.synced",
        }
    }
}

impl fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not one of the webhook event names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown webhook event {0:?}; expected document.ready, document.failed, \
     document.pii_detected, document.deleted or source.synced"
)]
pub struct UnknownWebhookEvent(pub String);

impl FromStr for WebhookEvent {
    type Err = UnknownWebhookEvent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|event| event.as_str() == s)
            .ok_or_else(|| UnknownWebhookEvent(s.to_owned()))
    }
}

/// A timestamp as every API response and webhook writes it: ISO 8601 in UTC with
/// milliseconds and a `Z`, such as `2026-05-01T12:00:00.000Z`.
pub fn wire_timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The body of a webhook delivery: `{"event", "timestamp", "data"}`, serialised once when the
/// event is recorded so every attempt sends the same bytes.
pub fn envelope_body(event: WebhookEvent, at: DateTime<Utc>, data: Map<String, Value>) -> String {
    #[derive(Serialize)]
    struct Envelope {
        event: WebhookEvent,
        timestamp: String,
        data: Map<String, Value>,
    }
    let envelope = Envelope {
        event,
        timestamp: wire_timestamp(at),
        data,
    };
    // A map of JSON values with string keys always serialises.
    serde_json::to_string(&envelope).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_text_and_json() {
        for event in WebhookEvent::ALL {
            assert_eq!(event.as_str().parse::<WebhookEvent>().unwrap(), event);
            let json = serde_json::to_string(&event).unwrap();
            assert_eq!(json, format!("\"{}\"", event.as_str()));
            assert_eq!(serde_json::from_str::<WebhookEvent>(&json).unwrap(), event);
        }
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = "document.updated".parse::<WebhookEvent>().unwrap_err();
        let message = err.to_string();
        for event in WebhookEvent::ALL {
            assert!(message.contains(event.as_str()), "{message}");
        }
        assert!(message.contains("document.updated"));
        assert!("DocumentReady".parse::<WebhookEvent>().is_err());
    }

    #[test]
    fn envelope_has_event_millisecond_timestamp_and_data() {
        let at = DateTime::parse_from_rfc3339("2026-05-01T12:00:00.5Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut data = Map::new();
        data.insert("documentId".into(), "d".into());
        let body = envelope_body(WebhookEvent::DocumentReady, at, data);
        let parsed: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({
                "event": "document.ready",
                "timestamp": "2026-05-01T12:00:00.500Z",
                "data": {"documentId": "d"}
            })
        );
    }
}
