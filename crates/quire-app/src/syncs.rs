//! Sources that keep themselves in sync with an origin (a folder on the server, an S3 bucket
//! prefix, a web site): created by admin keys, run on demand or every `intervalSeconds`, each run taking
//! the origin's new items as documents, changed ones as new versions of the same documents,
//! and deleting the documents of items that are gone; unchanged items are not fetched again.
//! Credentials are sealed before they are stored and never shown.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, TryStreamExt};
use quire_core::{
    ExternalId, Metadata, NewSource, SourceId, SourceRecord, SourceScope, SourceType,
};
use quire_store::{Created, NewSync, SourceSync, SyncCounts, SyncRun};
use quire_sync::{FolderOrigin, Origin, Patterns, S3Origin, S3Spec, SecretBox, WebOrigin, WebSpec};
use serde_json::{Map, Value, json};

use crate::sources::SourceSpec;
use crate::{Actor, AppError, Services, audit, uploads};

/// Longest interval a source may sync at by itself: a week.
const MAX_INTERVAL_SECONDS: u64 = 7 * 24 * 3600;
/// Interval when none is given: an hour.
const DEFAULT_INTERVAL_SECONDS: u64 = 3600;
/// Runs a listing shows at most.
pub const MAX_LISTED_RUNS: u32 = 100;
/// Counter of ended sync runs, by `status` (`succeeded`, `failed`).
pub const SYNC_RUNS: &str = "quire_sync_runs_total";
/// Counter of items sync runs handled, by `outcome` (`added`, `updated`, `deleted`,
/// `unchanged`, `failed`).
pub const SYNC_ITEMS: &str = "quire_sync_items_total";
/// Counter of bytes sync runs fetched from their origins.
pub const SYNC_BYTES: &str = "quire_sync_fetched_bytes_total";
/// Items a run fetches and stores at once (its bound on concurrent requests to the origin;
/// a web source's pages are fetched while listing, one request at a time per host).
const ITEMS_IN_FLIGHT: usize = 4;

/// What syncing needs from the operator: where folders may be read, whether web sources may
/// reach internal addresses, the key that seals credentials, and this node's name (each run
/// records the node that runs it).
#[derive(Clone)]
pub struct SyncSettings {
    /// Directories a `folder` source may read from (`connectors.folder_roots`); none: no
    /// folder source can be created.
    pub folder_roots: Vec<PathBuf>,
    /// Whether web sources may reach loopback, private and link-local addresses
    /// (`connectors.allow_private_targets`).
    pub allow_private_targets: bool,
    /// Seals and opens the sources' credentials.
    pub secrets: Arc<SecretBox>,
    /// This node's name.
    pub node: String,
    /// How long a run stays leased to this node without a renewal (`workers.lease_seconds`,
    /// as for jobs); it is renewed every third of that while the run goes on.
    pub lease: chrono::Duration,
}

impl std::fmt::Debug for SyncSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncSettings")
            .field("folder_roots", &self.folder_roots)
            .field("allow_private_targets", &self.allow_private_targets)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// A `sync` object, validated: the origin's settings to store (credentials left out), the
/// credential to seal, the patterns and the interval.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    kind: SourceType,
    config: Map<String, Value>,
    secret: Option<String>,
    interval_seconds: u64,
}

/// The fields every `sync` object may have besides its type's own.
const COMMON_FIELDS: [&str; 3] = ["include", "exclude", "intervalSeconds"];
/// A web source's cap on pages per run.
const WEB_MAX_PAGES: &str = "maxPages";
/// A web source's cap on link depth from its start page.
const WEB_MAX_DEPTH: &str = "maxDepth";

impl SyncRequest {
    /// Validates the `sync` object of a source of type `kind`; [`AppError::Invalid`] naming
    /// what is wrong.
    pub fn parse(kind: SourceType, sync: &Value) -> Result<Self, AppError> {
        let invalid = |m: String| AppError::Invalid(format!("sync: {m}"));
        let Value::Object(object) = sync else {
            return Err(invalid("must be a JSON object".into()));
        };
        let own: &[&str] = match kind {
            SourceType::Folder => &["path"],
            SourceType::S3 => &[
                "url",
                "endpoint",
                "region",
                "accessKeyId",
                "secretAccessKey",
                "allowHttp",
            ],
            SourceType::Web => &["url", WEB_MAX_PAGES, WEB_MAX_DEPTH],
            SourceType::Network => {
                return Err(AppError::Invalid(
                    "a \"network\" source is filled by uploads and takes no `sync`".into(),
                ));
            }
        };
        if let Some(unknown) = object
            .keys()
            .find(|k| !own.contains(&k.as_str()) && !COMMON_FIELDS.contains(&k.as_str()))
        {
            return Err(invalid(format!(
                "unknown field `{unknown}`; a {kind} source takes {}",
                own.iter()
                    .chain(COMMON_FIELDS.iter())
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for field in ["include", "exclude"] {
            match object.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
                Some(_) => return Err(invalid(format!("`{field}` must be an array of strings"))),
            }
        }
        let interval_seconds = match object.get("intervalSeconds") {
            None | Some(Value::Null) => DEFAULT_INTERVAL_SECONDS,
            Some(value) => value
                .as_u64()
                .filter(|s| *s <= MAX_INTERVAL_SECONDS)
                .ok_or_else(|| {
                    invalid(format!(
                        "`intervalSeconds` must be a whole number from 0 (on demand only) to \
                         {MAX_INTERVAL_SECONDS}"
                    ))
                })?,
        };
        for (field, max) in [
            (WEB_MAX_PAGES, quire_sync::web::MAX_PAGES),
            (WEB_MAX_DEPTH, quire_sync::web::MAX_DEPTH),
        ] {
            let least = u64::from(field == WEB_MAX_PAGES);
            match object.get(field) {
                None | Some(Value::Null) => {}
                Some(value) if value.as_u64().is_some_and(|n| (least..=max).contains(&n)) => {}
                Some(_) => {
                    return Err(invalid(format!(
                        "`{field}` must be a whole number from {least} to {max}"
                    )));
                }
            }
        }
        for field in own {
            match (object.get(*field), *field) {
                (_, WEB_MAX_PAGES | WEB_MAX_DEPTH) => {}
                (Some(Value::Bool(_)) | None | Some(Value::Null), "allowHttp") => {}
                (Some(_), "allowHttp") => {
                    return Err(invalid("`allowHttp` must be true or false".into()));
                }
                (Some(Value::String(s)), _) if !s.trim().is_empty() => {}
                (None | Some(Value::Null), "path" | "url") => {
                    return Err(invalid(format!("`{field}` is required")));
                }
                (None | Some(Value::Null), _) => {}
                (Some(_), _) => {
                    return Err(invalid(format!("`{field}` must be a non-empty string")));
                }
            }
        }
        let mut config = object.clone();
        config.remove("intervalSeconds");
        let secret = config
            .remove("secretAccessKey")
            .and_then(|v| v.as_str().map(str::to_owned));
        let request = Self {
            kind,
            config,
            secret,
            interval_seconds,
        };
        request.patterns()?;
        Ok(request)
    }

    fn strings(&self, field: &str) -> Vec<String> {
        self.config
            .get(field)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn patterns(&self) -> Result<Patterns, AppError> {
        Patterns::new(&self.strings("include"), &self.strings("exclude"))
            .map_err(|e| AppError::Invalid(format!("sync: {e}")))
    }

    fn text(&self, field: &str) -> Option<String> {
        self.config
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    fn number(&self, field: &str) -> Option<u64> {
        self.config.get(field).and_then(Value::as_u64)
    }

    /// The origin these settings read, with `secret` as the S3 credential.
    fn origin(
        &self,
        services: &Services,
        secret: Option<String>,
    ) -> Result<Box<dyn Origin>, AppError> {
        let invalid = |e: quire_sync::SyncError| AppError::Invalid(format!("sync: {e}"));
        let settings = sync_settings(services)?;
        let patterns = self.patterns()?;
        Ok(match self.kind {
            SourceType::Folder => {
                let path = PathBuf::from(self.text("path").unwrap_or_default());
                Box::new(
                    FolderOrigin::open(&settings.folder_roots, &path, patterns).map_err(invalid)?,
                )
            }
            SourceType::S3 => {
                let spec = S3Spec {
                    url: self.text("url").unwrap_or_default(),
                    endpoint: self.text("endpoint"),
                    region: self.text("region"),
                    access_key_id: self.text("accessKeyId"),
                    secret_access_key: secret,
                    allow_http: self
                        .config
                        .get("allowHttp")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                };
                Box::new(S3Origin::new(&spec, patterns).map_err(invalid)?)
            }
            SourceType::Web => {
                let spec = WebSpec {
                    url: self.text("url").unwrap_or_default(),
                    max_pages: self
                        .number(WEB_MAX_PAGES)
                        .unwrap_or(quire_sync::web::DEFAULT_MAX_PAGES),
                    max_depth: self
                        .number(WEB_MAX_DEPTH)
                        .unwrap_or(quire_sync::web::DEFAULT_MAX_DEPTH),
                    allow_private: settings.allow_private_targets,
                    max_page_bytes: services.max_upload_bytes(),
                    spool_in: Some(services.ingest.staging_directory().to_owned()),
                };
                Box::new(WebOrigin::new(&spec, patterns).map_err(invalid)?)
            }
            SourceType::Network => {
                return Err(AppError::Invalid("a network source does not sync".into()));
            }
        })
    }

    /// The stored settings back as a request (the credential stays sealed in the store).
    fn from_stored(stored: &SourceSync) -> Result<Self, AppError> {
        let kind = SourceType::parse(&stored.kind).map_err(|e| AppError::internal(&e.0))?;
        let config: Map<String, Value> =
            serde_json::from_str(&stored.config).map_err(|e| AppError::internal(&e))?;
        Ok(Self {
            kind,
            config,
            secret: None,
            interval_seconds: stored.interval_seconds,
        })
    }
}

/// Replaces the sync settings of source `id` with `sync` (the whole object, as at creation;
/// a stored credential is kept when `sync` gives none); an admin key's to make. The settings
/// are checked as at creation, the next run comes at once (items the new patterns leave out
/// are then deleted like items gone from the origin), and the change is audited. A network
/// source is [`AppError::Invalid`]; one outside the key's scope [`AppError::NotFound`].
pub async fn update(
    services: &Services,
    actor: &Actor,
    scope: &SourceScope,
    id: SourceId,
    sync: &Value,
) -> Result<(SourceRecord, Option<SyncView>), AppError> {
    let source = crate::sources::get(services, scope, id).await?;
    if !actor.is_admin() {
        return Err(AppError::Forbidden(
            "changing how a source syncs needs an admin key: the server reads its origin on \
             the caller's behalf"
                .into(),
        ));
    }
    let kind = SourceType::parse(&source.source_type).map_err(|e| AppError::internal(&e.0))?;
    if kind == SourceType::Network {
        return Err(AppError::Invalid(format!(
            "data source {id} is a network source: it is filled by uploads and does not sync"
        )));
    }
    let request = SyncRequest::parse(kind, sync)?;
    let settings = sync_settings(services)?;
    request.origin(services, request.secret.clone())?;
    if kind == SourceType::Web {
        quire_sync::web::check_target(
            &request.text("url").unwrap_or_default(),
            settings.allow_private_targets,
        )
        .await
        .map_err(|e| AppError::Invalid(format!("sync: {e}")))?;
    }
    let stored = services
        .store
        .source_sync(id)
        .await?
        .ok_or_else(|| AppError::internal(&format!("syncing source {id} has no settings")))?;
    let sealed_secret = match &request.secret {
        Some(secret) => Some(settings.secrets.seal(secret)),
        None => stored.sealed_secret,
    };
    let now = services.clock.now();
    let updated = services
        .store
        .update_source_sync(
            id,
            NewSync {
                kind: kind.as_str().to_owned(),
                config: Value::Object(request.config.clone()).to_string(),
                sealed_secret,
                interval_seconds: request.interval_seconds,
                next_run_at: Some(now),
            },
        )
        .await?;
    if !updated {
        return Err(AppError::NotFound(format!("data source {id} not found")));
    }
    audit::record(
        services,
        actor,
        "source.sync_changed",
        format!("{} ({id}): its {kind} sync settings replaced", source.name),
    )
    .await?;
    let view = view(services, scope, id).await?;
    Ok((source, view))
}

/// A source's sync as callers see it: its settings without credentials, whether one is
/// stored, its last run and when it next runs by itself.
#[derive(Debug, Clone)]
pub struct SyncView {
    /// The origin's settings (`path`, or `url`, `endpoint`, … without `secretAccessKey`),
    /// with `include`, `exclude` and `intervalSeconds`.
    pub settings: Map<String, Value>,
    /// Whether a credential is stored (it is never shown).
    pub has_secret: bool,
    /// The newest run, if any.
    pub last_run: Option<SyncRun>,
    /// When it next syncs by itself (`None`: on demand only, or running now).
    pub next_run_at: Option<DateTime<Utc>>,
}

/// Creates a source of `spec`'s type: a network source without `sync`, a `folder`, `s3` or
/// `web` source with it (see [`create`]); the one way every adapter creates sources. Returns
/// the source and, for a syncing one, its sync as callers see it. A type and a `sync` that do
/// not go together are [`AppError::Invalid`].
pub async fn create_source(
    services: &Services,
    actor: &Actor,
    spec: SourceSpec,
    sync: Option<&Value>,
) -> Result<(SourceRecord, Option<SyncView>), AppError> {
    let kind = spec.source_type;
    match (kind.syncs(), sync) {
        (true, Some(sync)) => {
            let request = SyncRequest::parse(kind, sync)?;
            let source = create(services, actor, spec, request).await?;
            let view = view(services, actor.scope(), source.id).await?;
            Ok((source, view))
        }
        (true, None) => Err(AppError::Invalid(format!(
            "a {kind} source needs a `sync` object saying where it syncs from"
        ))),
        (false, Some(_)) => Err(AppError::Invalid(
            "`sync` goes with a `folder`, `s3` or `web` source; a network source is filled by \
             uploads"
                .into(),
        )),
        // A key limited to some sources is refused here (see `crate::sources::create`).
        (false, None) => Ok((crate::sources::create(services, actor, spec).await?, None)),
    }
}

/// Creates a source that syncs from the origin `sync` describes; an admin key's (or the
/// administrator's) to make, since the server reads the origin on the caller's behalf. The
/// origin's settings are checked (a folder outside the allowed roots, a bad URL or pattern is
/// [`AppError::Invalid`]), the credential sealed, and the first run comes at once.
pub async fn create(
    services: &Services,
    actor: &Actor,
    spec: SourceSpec,
    sync: SyncRequest,
) -> Result<SourceRecord, AppError> {
    if !actor.is_admin() {
        return Err(AppError::Forbidden(
            "creating a source that syncs needs an admin key: the server reads its origin on \
             the caller's behalf"
                .into(),
        ));
    }
    if spec.source_type != sync.kind {
        return Err(AppError::Invalid(
            "the `sync` object does not match the source's `type`".into(),
        ));
    }
    let settings = sync_settings(services)?;
    // Checks the settings (roots, URL, patterns) without contacting the origin.
    sync.origin(services, sync.secret.clone())?;
    if sync.kind == SourceType::Web {
        // A site on an internal address is refused now rather than at every run.
        quire_sync::web::check_target(
            &sync.text("url").unwrap_or_default(),
            settings.allow_private_targets,
        )
        .await
        .map_err(|e| AppError::Invalid(format!("sync: {e}")))?;
    }
    let now = services.clock.now();
    let mut config = sync.config.clone();
    config.insert("intervalSeconds".into(), json!(sync.interval_seconds));
    let source = services
        .store
        .create_syncing_source(
            NewSource {
                id: SourceId::new(),
                name: spec.name,
                description: spec.description,
                source_type: spec.source_type,
                created_at: now,
            },
            NewSync {
                kind: sync.kind.as_str().to_owned(),
                config: Value::Object(sync.config.clone()).to_string(),
                sealed_secret: sync.secret.as_deref().map(|s| settings.secrets.seal(s)),
                interval_seconds: sync.interval_seconds,
                next_run_at: Some(now),
            },
        )
        .await?;
    audit::record(
        services,
        actor,
        "source.created",
        format!(
            "{} ({}), syncing from a {} origin",
            source.name, source.id, sync.kind
        ),
    )
    .await?;
    Ok(source)
}

/// The sync of source `id` (in `scope`), or `None` when it is a network source;
/// [`AppError::NotFound`] when there is no such source in scope.
pub async fn view(
    services: &Services,
    scope: &SourceScope,
    id: SourceId,
) -> Result<Option<SyncView>, AppError> {
    let source = crate::sources::get(services, scope, id).await?;
    view_of(services, &source).await
}

/// The sync of `source`, a record the caller read within its scope (a listing's): `None` for
/// a network source, without reading the store.
pub async fn view_of(
    services: &Services,
    source: &SourceRecord,
) -> Result<Option<SyncView>, AppError> {
    if source.source_type == SourceType::Network.as_str() {
        return Ok(None);
    }
    let id = source.id;
    let Some(stored) = services.store.source_sync(id).await? else {
        return Ok(None);
    };
    let mut settings: Map<String, Value> =
        serde_json::from_str(&stored.config).map_err(|e| AppError::internal(&e))?;
    settings.insert("intervalSeconds".into(), json!(stored.interval_seconds));
    let last_run = services.store.sync_runs(id, 1).await?.pop();
    let running = last_run.as_ref().is_some_and(|r| r.status == "running");
    Ok(Some(SyncView {
        settings,
        has_secret: stored.sealed_secret.is_some(),
        next_run_at: (!running).then_some(stored.next_run_at).flatten(),
        last_run,
    }))
}

/// The runs of source `id` (in `scope`), newest first, at most `limit` (capped at
/// [`MAX_LISTED_RUNS`]); none for a network source.
pub async fn runs(
    services: &Services,
    scope: &SourceScope,
    id: SourceId,
    limit: u32,
) -> Result<Vec<SyncRun>, AppError> {
    crate::sources::get(services, scope, id).await?;
    // A network source never runs: it has no runs to list.
    Ok(services
        .store
        .sync_runs(id, limit.clamp(1, MAX_LISTED_RUNS))
        .await?)
}

/// Starts a run of source `id` now, in the background; the run as it started.
/// [`AppError::Conflict`] while one runs, [`AppError::Invalid`] for a network source; a
/// `read-write` key or more within the source's scope may ask.
pub async fn start(services: &Services, actor: &Actor, id: SourceId) -> Result<SyncRun, AppError> {
    crate::sources::get(services, actor.scope(), id).await?;
    if services.store.source_sync(id).await?.is_none() {
        return Err(AppError::Invalid(format!(
            "data source {id} is a network source, filled by uploads: it does not sync"
        )));
    }
    let run = begin(services, id)
        .await?
        .ok_or_else(|| AppError::Conflict(format!("data source {id} is syncing already")))?;
    audit::record(services, actor, "source.sync_started", format!("{id}")).await?;
    let (services, started) = (services.clone(), run.clone());
    tokio::spawn(async move { carry_out(&services, started).await });
    Ok(run)
}

/// Starts the runs that are due, each in the background: what a node's scheduler calls.
pub async fn run_due(services: &Services) -> Result<usize, AppError> {
    let expired = services
        .store
        .fail_expired_sync_runs(services.clock.now())
        .await?;
    if expired > 0 {
        tracing::warn!(
            runs = expired,
            "sync runs whose node stopped renewing their lease are recorded as failed; they run \
             again now"
        );
    }
    let due = services.store.due_syncs(services.clock.now()).await?;
    let mut started = 0;
    for id in due {
        if let Some(run) = begin(services, id).await? {
            started += 1;
            let services = services.clone();
            tokio::spawn(async move { carry_out(&services, run).await });
        }
    }
    Ok(started)
}

async fn begin(services: &Services, id: SourceId) -> Result<Option<SyncRun>, AppError> {
    let settings = sync_settings(services)?;
    let now = services.clock.now();
    Ok(services
        .store
        .start_sync_run(
            id,
            uuid::Uuid::new_v4(),
            &settings.node,
            now,
            now + settings.lease,
        )
        .await?)
}

fn sync_settings(services: &Services) -> Result<&SyncSettings, AppError> {
    services
        .syncs
        .as_ref()
        .ok_or_else(|| AppError::Invalid("this server does not run syncing sources".into()))
}

/// Runs `run` to its end and records it, whatever happens.
async fn carry_out(services: &Services, mut run: SyncRun) {
    let (source, id) = (run.source_id, run.id);
    let outcome = tokio::select! {
        outcome = sync_once(services, &mut run) => outcome,
        () = hold_lease(services, id) => {
            tracing::warn!(
                %source,
                "a sync run's lease was taken away (this node stalled past it); the run stops here"
            );
            return;
        }
    };
    run.finished_at = Some(services.clock.now());
    match outcome {
        Ok(()) => run.status = "succeeded".into(),
        Err(e) => {
            tracing::warn!(%source, error = %e, "a sync run failed");
            run.status = "failed".into();
            run.error = Some(e.to_string());
        }
    }
    let next = match services.store.source_sync(source).await {
        Ok(Some(stored)) if stored.interval_seconds > 0 => Some(
            services.clock.now()
                + chrono::Duration::seconds(i64::try_from(stored.interval_seconds).unwrap_or(3600)),
        ),
        _ => None,
    };
    metrics::counter!(SYNC_RUNS, "status" => run.status.clone()).increment(1);
    for (outcome, count) in [
        ("added", run.counts.added),
        ("updated", run.counts.updated),
        ("deleted", run.counts.deleted),
        ("unchanged", run.counts.unchanged),
        ("failed", run.counts.failed),
    ] {
        metrics::counter!(SYNC_ITEMS, "outcome" => outcome).increment(count);
    }
    match services.store.finish_sync_run(&run, next).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            %source,
            "a sync run ended after its lease ran out; another node had recorded it as interrupted"
        ),
        Err(e) => tracing::error!(%source, error = %e, "could not record the end of a sync run"),
    }
    tracing::info!(
        %source,
        status = %run.status,
        added = run.counts.added,
        updated = run.counts.updated,
        deleted = run.counts.deleted,
        unchanged = run.counts.unchanged,
        failed = run.counts.failed,
        "sync run ended"
    );
}

/// Renews run `id`'s lease every third of its length; returns only when the run is no longer
/// this node's (another node ended it as interrupted). A renewal the database does not answer
/// is tried again after a tenth of the lease.
async fn hold_lease(services: &Services, id: uuid::Uuid) {
    let Ok(settings) = sync_settings(services) else {
        return std::future::pending().await;
    };
    let lease = settings
        .lease
        .to_std()
        .unwrap_or(std::time::Duration::from_secs(30));
    let mut wait = lease / 3;
    loop {
        tokio::time::sleep(wait).await;
        match services
            .store
            .renew_sync_run(id, services.clock.now() + settings.lease)
            .await
        {
            Ok(true) => wait = lease / 3,
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not renew a sync run's lease");
                wait = lease / 10;
            }
        }
    }
}

/// One pass over the origin. An error here fails the run as a whole (the origin could not be
/// read or listed); an item's failure is counted and recorded, and the run goes on.
async fn sync_once(services: &Services, run: &mut SyncRun) -> Result<(), AppError> {
    let source = run.source_id;
    let settings = sync_settings(services)?;
    let stored = services
        .store
        .source_sync(source)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("data source {source} no longer syncs")))?;
    let request = SyncRequest::from_stored(&stored)?;
    let secret = stored
        .sealed_secret
        .as_deref()
        .map(|sealed| settings.secrets.open(sealed))
        .transpose()
        .map_err(|e| AppError::Invalid(format!("the source's credential cannot be opened: {e}")))?;
    let origin = request.origin(services, secret)?;
    let known: HashMap<String, String> = services
        .store
        .sync_items(source)
        .await?
        .into_iter()
        .collect();
    let items = origin
        .list_since(&known)
        .await
        .map_err(|e| AppError::Invalid(format!("the origin could not be listed: {e}")))?;
    let actor = Actor::Sync { source };
    // The source's documents by external id, read once for the whole run.
    let documents: HashMap<String, quire_core::DocumentId> = services
        .store
        .list_documents(&SourceScope::All, source)
        .await?
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| Some((d.external_id?.as_str().to_owned(), d.id)))
        .collect();
    let mut failures: BTreeMap<String, String> = BTreeMap::new();
    let mut counts = SyncCounts::default();
    let mut seen = std::collections::HashSet::new();
    let mut to_take = Vec::new();
    for (index, item) in items.iter().enumerate() {
        seen.insert(item.external_id.clone());
        let external_id = match ExternalId::parse(&item.external_id) {
            Ok(id) => id,
            Err(e) => {
                failures.insert(item.external_id.clone(), e.0);
                continue;
            }
        };
        let exists = documents.contains_key(&item.external_id);
        if exists && known.get(&item.external_id) == Some(&item.fingerprint) {
            counts.unchanged += 1;
            continue;
        }
        to_take.push((index, external_id));
    }
    // A few items at a time: an origin's latency per item (an S3 GET) is paid in parallel,
    // within a bound per run. Each item's fingerprint is recorded once its document is.
    let (actor, origin, items) = (&actor, origin.as_ref(), &items);
    let taken: Vec<_> = futures_util::stream::iter(to_take)
        .map(|(index, external_id)| async move {
            let item = &items[index];
            let outcome = take(services, actor, source, origin, item, external_id).await;
            if outcome.is_ok() {
                services
                    .store
                    .set_sync_item(source, &item.external_id, Some(&item.fingerprint))
                    .await?;
            }
            Ok::<_, AppError>((item, outcome))
        })
        .buffer_unordered(ITEMS_IN_FLIGHT)
        .try_collect()
        .await?;
    for (item, outcome) in taken {
        match outcome {
            Ok(Created::New(_)) => counts.added += 1,
            Ok(Created::Version(_)) => counts.updated += 1,
            Ok(Created::Existing(_)) => counts.unchanged += 1,
            Err(e) => {
                failures.insert(item.external_id.clone(), e.to_string());
            }
        }
    }
    for gone in known.keys().filter(|k| !seen.contains(*k)) {
        if let Some(document) = documents.get(gone) {
            match crate::documents::delete(services, actor, source, *document).await {
                Ok(_) => counts.deleted += 1,
                // Deleted by someone else since the run began: gone either way.
                Err(AppError::NotFound(_)) => {}
                Err(e) => {
                    failures.insert(gone.clone(), e.to_string());
                    continue;
                }
            }
        }
        services.store.set_sync_item(source, gone, None).await?;
    }
    counts.failed = failures.len() as u64;
    run.counts = counts;
    run.failures = Value::Array(
        failures
            .into_iter()
            .map(|(external_id, reason)| json!({"externalId": external_id, "reason": reason}))
            .collect(),
    )
    .to_string();
    Ok(())
}

/// Fetches `item` and stores it as a new document, or a new version of the document with its
/// external id, with the origin's metadata.
async fn take(
    services: &Services,
    actor: &Actor,
    source: SourceId,
    origin: &dyn Origin,
    item: &quire_sync::Item,
    external_id: ExternalId,
) -> Result<Created, AppError> {
    let stream = origin
        .open(item)
        .await
        .map_err(|e| AppError::Invalid(format!("could not be read: {e}")))?;
    let mut upload = uploads::receive_part(services, Some(&item.name), None, stream)
        .await
        .map_err(|refused| match refused.into_app() {
            Ok(refused) => refused,
            Err(e) => AppError::Invalid(format!("could not be read: {e}")),
        })?;
    metrics::counter!(SYNC_BYTES).increment(upload.staged.size);
    upload.external_id = Some(external_id);
    upload.metadata = Some(
        Metadata::from_json(&Value::Object(item.metadata.clone()))
            .map_err(|e| AppError::Invalid(format!("its metadata: {}", e.0)))?,
    );
    uploads::accept(services, actor, source, upload).await
}
