//! Webhooks: registering one (the target is checked against the SSRF guard before anything is
//! stored, and the signing secret is made here and shown once), and reading or deleting them
//! within the caller's scope.
//!
//! A webhook carries the scope of the key that registered it (narrowed to the sources the
//! request names, if any) and receives only the events of those sources. A scoped key sees,
//! deletes and reads the delivery log of only the webhooks whose scope lies within its own;
//! any other webhook is "not found", exactly like a webhook that does not exist.

use quire_core::{SourceScope, WebhookEvent, WebhookId};
use quire_store::{DeliveryAttempt, NewWebhook, WebhookRecord};

use crate::{Actor, AppError, Ledger, Services, audit};

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

/// Registers a webhook for `events` at `raw_url`, receiving the events of the sources in
/// `scope` (the caller's scope, already narrowed to the sources the request names: see
/// [`crate::scope::requested_scope`]). Refused with [`AppError::Invalid`] when the URL is
/// malformed or not `http(s)`, when no event is named, or when the target resolves to an
/// internal address (unless `webhooks.allow_private_targets`).
pub async fn register(
    services: &Services,
    actor: &Actor,
    scope: SourceScope,
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
            scope,
            created_at: services.clock.now(),
        })
        .await?;
    audit::record(
        services,
        actor,
        "webhook.created",
        format!("{} ({})", webhook.url, webhook.id),
    )
    .await?;
    Ok(Registered { webhook, secret })
}

/// True when a caller limited to `caller` may see `webhook`: every source the webhook listens
/// to lies within the caller's scope.
pub fn visible_to(caller: &SourceScope, webhook: &WebhookRecord) -> bool {
    match (caller, &webhook.scope) {
        (SourceScope::All, _) => true,
        (SourceScope::Only(_), SourceScope::All) => false,
        (SourceScope::Only(_), SourceScope::Only(ids)) => ids.iter().all(|id| caller.allows(*id)),
    }
}

/// The webhooks the caller may see, oldest first.
pub async fn list(ledger: &Ledger, caller: &SourceScope) -> Result<Vec<WebhookRecord>, AppError> {
    let mut webhooks = ledger.store().list_webhooks().await?;
    webhooks.retain(|w| visible_to(caller, w));
    Ok(webhooks)
}

/// The webhook `id`; [`AppError::NotFound`] when it does not exist or lies outside the caller's
/// scope.
pub async fn get(
    ledger: &Ledger,
    caller: &SourceScope,
    id: WebhookId,
) -> Result<WebhookRecord, AppError> {
    ledger
        .store()
        .get_webhook(id)
        .await?
        .filter(|w| visible_to(caller, w))
        .ok_or_else(|| not_found(id))
}

/// Deletes the webhook `id` with its pending events and delivery log, and records it in the
/// audit log; [`AppError::NotFound`] as for [`get`] within the actor's scope.
pub async fn delete(ledger: &Ledger, actor: &Actor, id: WebhookId) -> Result<(), AppError> {
    let webhook = get(ledger, actor.scope(), id).await?;
    if !ledger.store().delete_webhook(id).await? {
        return Err(not_found(id));
    }
    audit::record(
        ledger,
        actor,
        "webhook.deleted",
        format!("{} ({})", webhook.url, webhook.id),
    )
    .await
}

/// The webhook's most recent delivery attempts, newest first, at most `limit`;
/// [`AppError::NotFound`] as for [`get`].
pub async fn deliveries(
    ledger: &Ledger,
    caller: &SourceScope,
    id: WebhookId,
    limit: u32,
) -> Result<Vec<DeliveryAttempt>, AppError> {
    get(ledger, caller, id).await?;
    Ok(ledger.store().deliveries(id, limit).await?)
}

fn not_found(id: WebhookId) -> AppError {
    AppError::NotFound(format!("webhook {id} not found"))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use quire_core::SourceId;

    use super::*;

    fn hook(scope: SourceScope) -> WebhookRecord {
        WebhookRecord {
            id: WebhookId::new(),
            url: "https://hooks.example/q".into(),
            events: vec![WebhookEvent::DocumentReady],
            secret: "whsec_x".into(),
            scope,
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_scoped_key_sees_only_webhooks_within_its_scope() {
        let (a, b) = (SourceId::new(), SourceId::new());
        let key_a = SourceScope::only([a]);
        assert!(visible_to(&key_a, &hook(SourceScope::only([a]))));
        assert!(!visible_to(&key_a, &hook(SourceScope::only([a, b]))));
        assert!(!visible_to(&key_a, &hook(SourceScope::only([b]))));
        assert!(!visible_to(&key_a, &hook(SourceScope::All)));
        assert!(visible_to(&SourceScope::All, &hook(SourceScope::only([b]))));
        assert!(visible_to(&SourceScope::All, &hook(SourceScope::All)));
    }

    #[test]
    fn events_are_parsed_once_each_in_order() {
        let events =
            parse_events(&["document.failed", "document.ready", "document.failed"]).unwrap();
        assert_eq!(
            events,
            [WebhookEvent::DocumentFailed, WebhookEvent::DocumentReady]
        );
        let unknown = parse_events(&["document.updated"]).unwrap_err();
        assert!(
            matches!(&unknown, AppError::Invalid(m) if m.contains("document.ready")),
            "{unknown:?}"
        );
    }
}
