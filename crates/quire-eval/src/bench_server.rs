//! The product's server started in-process for the benches that measure it as a client does
//! (`quire bench ingest`, `quire bench queries`, `quire bench generate`): `App::serve` on
//! 127.0.0.1:0 with its background workers, a key without a rate limit, and an HTTP client of
//! the API.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use quire_app::keys::KeySpec;
use quire_app::{Actor, Services};
use quire_core::{DocumentId, DocumentStatus, KeyId, Permission, SourceScope, SystemClock};
use quire_server::{App, Config, Parts};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::bench_ingest::InputFile;
use crate::progress::Progress;

/// Requests per minute of the bench's key: the benches measure the server, not the rate limit.
pub(crate) const UNLIMITED: u32 = 1_000_000;

/// How often [`wait_until_finished`] asks the store how many documents are finished.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// A running server, its services and a client holding a read-write key.
pub(crate) struct BenchServer {
    /// The server's use cases (the bench's key is created and revoked through them).
    pub(crate) state: Services,
    /// The parts the server was assembled from, for what a bench reads beside the API
    /// (counts, the embedder).
    pub(crate) parts: Parts,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// The API client.
    pub(crate) client: Client,
    key: KeyId,
    shutdown: oneshot::Sender<()>,
    server: JoinHandle<anyhow::Result<()>>,
}

impl BenchServer {
    /// Builds the server of `config` and serves it on a free loopback port; the client holds
    /// a read-write key named `key_name`.
    pub(crate) async fn start(config: &Config, key_name: &str) -> anyhow::Result<Self> {
        let app = quire_server::build(config, std::sync::Arc::new(SystemClock)).await?;
        let key = KeySpec {
            name: key_name.to_owned(),
            permission: Permission::ReadWrite,
            scope: SourceScope::All,
            rate_limit: Some(UNLIMITED),
        };
        Self::serve(app, key).await
    }

    /// Serves `app` on a free loopback port, with a client holding a new key of `key`.
    pub(crate) async fn serve(app: App, key: KeySpec) -> anyhow::Result<Self> {
        let state = app.services().clone();
        let parts = app.parts().clone();
        let (record, secret) = quire_app::keys::create(&state, &Actor::Operator, key).await?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("could not listen on 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let base = format!("http://{addr}/api/v1");
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(app.serve(listener, async {
            let _ = stopped.await;
        }));
        let client = Client {
            http: reqwest::Client::builder().no_proxy().build()?,
            base,
            secret: secret.expose().clone(),
        };
        Ok(Self {
            state,
            parts,
            addr,
            client,
            key: record.id,
            shutdown,
            server,
        })
    }

    /// Revokes the bench's key (a kept data directory must not keep a working key), stops the
    /// server and waits (at most a minute) until it has.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        quire_app::keys::revoke(&self.state, &Actor::Operator, self.key).await?;
        drop(self.state);
        drop(self.parts);
        let _ = self.shutdown.send(());
        tokio::time::timeout(Duration::from_secs(60), self.server)
            .await
            .context("the server did not stop within 60 s")???;
        Ok(())
    }

    /// Waits until `total` documents are ready, failed or held for review (the statuses no
    /// worker changes again); returns those three counts.
    pub(crate) async fn wait_until_finished(
        &self,
        total: usize,
    ) -> anyhow::Result<(u64, u64, u64)> {
        let total = u64::try_from(total).unwrap_or(u64::MAX);
        let mut progress = Progress::new("processing", total);
        let mut shown = 0;
        loop {
            let counts = self.parts.store.document_status_counts().await?;
            let of = |status| {
                counts
                    .iter()
                    .find(|(s, _)| *s == status)
                    .map_or(0, |(_, n)| *n)
            };
            let (ready, failed, held) = (
                of(DocumentStatus::Ready),
                of(DocumentStatus::Failed),
                of(DocumentStatus::PendingReview),
            );
            let finished = ready + failed + held;
            progress.inc(finished.saturating_sub(shown));
            shown = shown.max(finished);
            if finished >= total {
                progress.finish();
                return Ok((ready, failed, held));
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

/// The benches' HTTP client of the server.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    secret: String,
}

impl Client {
    /// The bench key's secret, for requests made without this client.
    pub(crate) fn secret(&self) -> &str {
        &self.secret
    }

    /// A `POST` of the API's `path` (such as `/search`) with the bench's key.
    pub(crate) fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.secret)
    }

    /// A `GET` of the API's `path` with the bench's key.
    pub(crate) fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.secret)
    }

    /// Creates a source and returns its id.
    pub(crate) async fn create_source(&self, name: &str) -> anyhow::Result<String> {
        let response = self
            .post("/sources")
            .json(&json!({ "name": name, "description": "quire bench" }))
            .send()
            .await?;
        let body = answer(response).await?;
        body["id"]
            .as_str()
            .map(str::to_owned)
            .context("the created source has no id")
    }

    /// Uploads `files` in one bulk request and returns the accepted documents' ids.
    pub(crate) async fn upload(
        &self,
        source: &str,
        files: &[InputFile],
    ) -> anyhow::Result<Vec<DocumentId>> {
        let mut form = reqwest::multipart::Form::new();
        for file in files {
            form = form.part(
                "file",
                reqwest::multipart::Part::bytes(file.bytes.clone()).file_name(file.name.clone()),
            );
        }
        let response = self
            .post(&format!("/sources/{source}/documents/upload-bulk"))
            .multipart(form)
            .send()
            .await?;
        let body = answer(response).await?;
        let mut ids = Vec::new();
        for entry in body["results"].as_array().into_iter().flatten() {
            match entry["document"]["id"].as_str() {
                Some(id) => ids.push(id.parse().context("a document id that is not a UUID")?),
                None => bail!(
                    "{} was {}: {}",
                    entry["name"],
                    entry["status"],
                    entry["error"]
                ),
            }
        }
        Ok(ids)
    }

    /// `POST /search` with `query` and `limit` (the server's default retrieval); returns the
    /// number of results.
    pub(crate) async fn search(&self, query: &str, limit: usize) -> anyhow::Result<usize> {
        let response = self
            .post("/search")
            .json(&json!({ "query": query, "limit": limit }))
            .send()
            .await?;
        let body = answer(response).await?;
        Ok(body["results"].as_array().map_or(0, Vec::len))
    }
}

/// The JSON body of a successful answer; an error with the body otherwise.
pub(crate) async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let status = response.status();
    let text = response.text().await?;
    if !status.is_success() {
        bail!("the server answered {status}: {text}");
    }
    serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))
}
