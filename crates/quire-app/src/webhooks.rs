//! Registering webhooks: the target is checked (scheme, host, and every address it resolves
//! to, against the SSRF guard) before anything is stored, and the signing secret is made here
//! and shown once.

use quire_core::{WebhookEvent, WebhookId};
use quire_store::{NewWebhook, WebhookRecord};

use crate::{AppError, Services};

/// A registered webhook and its signing secret (returned once, never again).
#[derive(Debug)]
pub struct Registered {
    /// The stored webhook.
    pub webhook: WebhookRecord,
    /// The Standard Webhooks secret (`whsec_…`) its deliveries are signed with.
    pub secret: String,
}

/// The events named in `names`, each once in the order first named; an unknown name is
/// [`AppError::Invalid`] with the list of known ones.
pub fn parse_events<S: AsRef<str>>(names: &[S]) -> Result<Vec<WebhookEvent>, AppError> {
    let mut events = Vec::new();
    for name in names {
        let name = name.as_ref();
        let event: WebhookEvent = name.parse().map_err(|_| {
            AppError::Invalid(format!(
                "unknown event {name:?}; events are {}",
                WebhookEvent::ALL
                    .iter()
                    .map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if !events.contains(&event) {
            events.push(event);
        }
    }
    Ok(events)
}

/// Registers a webhook for `events` at `raw_url`. Refused with [`AppError::Invalid`] when the
/// URL is malformed or not `http(s)`, when no event is named, or when the target resolves to
/// an internal address (unless `webhooks.allow_private_targets`).
pub async fn register(
    services: &Services,
    raw_url: &str,
    events: Vec<WebhookEvent>,
) -> Result<Registered, AppError> {
    let url = quire_webhooks::check_url(raw_url).map_err(|e| AppError::Invalid(e.to_string()))?;
    if events.is_empty() {
        return Err(AppError::Invalid(
            "`events` must name at least one event".into(),
        ));
    }
    quire_webhooks::resolve_and_check(&url, services.webhooks.allow_private_targets)
        .await
        .map_err(|e| AppError::Invalid(e.to_string()))?;
    let secret = quire_webhooks::new_secret().map_err(|e| AppError::internal(&e))?;
    let webhook = services
        .store
        .create_webhook(NewWebhook {
            id: WebhookId::new(),
            url: url.to_string(),
            events,
            secret: secret.clone(),
            created_at: services.clock.now(),
        })
        .await?;
    Ok(Registered { webhook, secret })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_parsed_once_each_in_order() {
        let events =
            parse_events(&["document.failed", "document.ready", "document.failed"]).unwrap();
        assert_eq!(
            events,
            [WebhookEvent::DocumentFailed, WebhookEvent::DocumentReady]
        );
        let unknown = parse_events(&["document.deleted"]).unwrap_err();
        assert!(
            matches!(&unknown, AppError::Invalid(m) if m.contains("document.ready")),
            "{unknown:?}"
        );
    }
}
