//! Query embeddings shared between concurrent searches: searches that arrive together are
//! embedded in one call of the model instead of one call each. What that gains is measured by
//! `quire bench queries` (docs/performance.md: +23 % requests/s at 32 clients on 2 cores).
//!
//! Only embedders whose vectors do not depend on their batch are batched
//! ([`Embedder::batch_invariant`]): with an int8 model, a query's vector would depend on the
//! queries that happened to share its call, and so its results on other searches.
//!
//! The batching never waits: a search that finds the embedder idle is embedded at once, alone,
//! so a single client sees the latency it always had. While a call runs, the queries that
//! arrive queue up and go together in the next call, so under load the batches grow by
//! themselves to match the arrival rate, with no timer to tune.

use std::sync::{Arc, OnceLock};

use quire_core::embed::{Embedder, ModelError, Purpose};
use tokio::sync::{mpsc, oneshot};

/// Most queries embedded in one call, so that one long query pads a bounded number of others
/// (the value is the largest client count `quire bench queries` measures, not a tuned optimum).
pub(crate) const MAX_QUERIES_PER_CALL: usize = 32;

/// One query waiting for its vector.
struct Request {
    text: String,
    reply: oneshot::Sender<Result<Vec<f32>, ModelError>>,
}

/// Embeds search queries, batching the ones that arrive while a call runs.
#[derive(Debug)]
pub(crate) struct QueryBatcher {
    embedder: Arc<dyn Embedder>,
    /// The queue of the task that makes the calls, started by the first query (on the runtime
    /// that serves searches).
    queue: OnceLock<mpsc::UnboundedSender<Request>>,
}

impl QueryBatcher {
    /// Batches the queries of `embedder`.
    pub(crate) fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self {
            embedder,
            queue: OnceLock::new(),
        }
    }

    /// The vector of `query`, embedded with whatever other queries wait at the same time
    /// (alone when the embedder's vectors depend on their batch).
    pub(crate) async fn embed(&self, query: &str) -> Result<Vec<f32>, ModelError> {
        if !self.embedder.batch_invariant() {
            return self.embed_alone(query).await;
        }
        let queue = self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(make_calls(Arc::clone(&self.embedder), receiver));
            sender
        });
        let (reply, answer) = oneshot::channel();
        let request = Request {
            text: query.to_owned(),
            reply,
        };
        if queue.send(request).is_err() {
            // The task is gone with the runtime that started it (a test's or a tool's): embed
            // alone rather than fail.
            return self.embed_alone(query).await;
        }
        match answer.await {
            Ok(result) => result,
            Err(_) => self.embed_alone(query).await,
        }
    }

    async fn embed_alone(&self, query: &str) -> Result<Vec<f32>, ModelError> {
        let mut vectors = self
            .embedder
            .embed(&[query.to_owned()], Purpose::Query)
            .await?;
        vectors
            .pop()
            .ok_or_else(|| ModelError::Inference("the embedder returned no vector".into()))
    }
}

/// Takes the first waiting query and every other one already waiting (up to
/// [`MAX_QUERIES_PER_CALL`]), embeds them in one call and answers each; until the queue closes.
async fn make_calls(embedder: Arc<dyn Embedder>, mut queue: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_QUERIES_PER_CALL {
            match queue.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        metrics::histogram!(QUERIES_PER_EMBEDDING_CALL).record(batch.len() as f64);
        let texts: Vec<String> = batch.iter().map(|r| r.text.clone()).collect();
        match embedder.embed(&texts, Purpose::Query).await {
            Ok(vectors) if vectors.len() == batch.len() => {
                for (request, vector) in batch.into_iter().zip(vectors) {
                    let _ = request.reply.send(Ok(vector));
                }
            }
            Ok(vectors) => {
                let message = format!(
                    "the embedder returned {} vectors for {} queries",
                    vectors.len(),
                    texts.len()
                );
                for request in batch {
                    let _ = request
                        .reply
                        .send(Err(ModelError::Inference(message.clone())));
                }
            }
            Err(error) => {
                for request in batch {
                    let _ = request.reply.send(Err(copy_of(&error)));
                }
            }
        }
    }
}

/// The metric of how many queries each call embedded.
pub const QUERIES_PER_EMBEDDING_CALL: &str = "quire_query_embeddings_per_call";

/// The same error for each query of a failed call ([`ModelError`] holds an `io::Error`, so it
/// cannot be cloned): the kinds the search path tells apart are kept, the rest carry the text.
fn copy_of(error: &ModelError) -> ModelError {
    match error {
        ModelError::Unreachable { url, reason } => ModelError::Unreachable {
            url: url.clone(),
            reason: reason.clone(),
        },
        ModelError::Timeout { url, seconds } => ModelError::Timeout {
            url: url.clone(),
            seconds: *seconds,
        },
        ModelError::Remote {
            url,
            status,
            message,
        } => ModelError::Remote {
            url: url.clone(),
            status: *status,
            message: message.clone(),
        },
        ModelError::Protocol { url, message } => ModelError::Protocol {
            url: url.clone(),
            message: message.clone(),
        },
        other => ModelError::Inference(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use async_trait::async_trait;
    use tokio::sync::Semaphore;

    use super::*;

    /// Records the size of each call; the first call waits for the gate.
    #[derive(Debug)]
    struct Recording {
        calls: Mutex<Vec<usize>>,
        gate: Semaphore,
        fail: bool,
        invariant: bool,
    }

    #[async_trait]
    impl Embedder for Recording {
        fn model_id(&self) -> &str {
            "recording"
        }
        fn dimensions(&self) -> usize {
            1
        }
        fn engine(&self) -> String {
            "test".into()
        }
        fn batch_invariant(&self) -> bool {
            self.invariant
        }
        async fn embed(
            &self,
            texts: &[String],
            purpose: Purpose,
        ) -> Result<Vec<Vec<f32>>, ModelError> {
            assert_eq!(purpose, Purpose::Query);
            let first = {
                let mut calls = self.calls.lock().unwrap();
                calls.push(texts.len());
                calls.len() == 1
            };
            if first {
                let _permit = self.gate.acquire().await.unwrap();
            }
            if self.fail {
                return Err(ModelError::Timeout {
                    url: "http://embedder".into(),
                    seconds: 1.0,
                });
            }
            // Each query's vector is its length, so answers can be matched to questions.
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    fn recording(fail: bool) -> Arc<Recording> {
        Arc::new(Recording {
            calls: Mutex::new(Vec::new()),
            gate: Semaphore::new(0),
            fail,
            invariant: true,
        })
    }

    #[tokio::test]
    async fn a_lone_query_is_embedded_at_once() {
        let embedder = recording(false);
        embedder.gate.add_permits(1);
        let batcher = QueryBatcher::new(embedder.clone());
        assert_eq!(batcher.embed("pump").await.unwrap(), vec![4.0]);
        assert_eq!(*embedder.calls.lock().unwrap(), vec![1]);
    }

    #[tokio::test]
    async fn queries_arriving_during_a_call_share_the_next_one() {
        let embedder = recording(false);
        let batcher = Arc::new(QueryBatcher::new(embedder.clone()));
        let ask = |text: String| {
            let batcher = Arc::clone(&batcher);
            tokio::spawn(async move { batcher.embed(&text).await })
        };
        // The first query holds the embedder; forty more arrive meanwhile.
        let first = ask("x".into());
        while embedder.calls.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let waiting: Vec<_> = (1..=40).map(|n| ask("y".repeat(n))).collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        embedder.gate.add_permits(1);
        assert_eq!(first.await.unwrap().unwrap(), vec![1.0]);
        for (n, handle) in (1..=40).zip(waiting) {
            assert_eq!(handle.await.unwrap().unwrap(), vec![n as f32], "query {n}");
        }
        assert_eq!(
            *embedder.calls.lock().unwrap(),
            vec![1, MAX_QUERIES_PER_CALL, 40 - MAX_QUERIES_PER_CALL]
        );
    }

    #[tokio::test]
    async fn queries_of_an_embedder_whose_vectors_depend_on_the_batch_go_alone() {
        let embedder = Arc::new(Recording {
            calls: Mutex::new(Vec::new()),
            gate: Semaphore::new(1),
            fail: false,
            invariant: false,
        });
        let batcher = Arc::new(QueryBatcher::new(embedder.clone()));
        let handles: Vec<_> = (1..=5)
            .map(|n| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move { batcher.embed(&"z".repeat(n)).await })
            })
            .collect();
        for (n, handle) in (1..=5).zip(handles) {
            assert_eq!(handle.await.unwrap().unwrap(), vec![n as f32]);
        }
        assert_eq!(*embedder.calls.lock().unwrap(), vec![1; 5]);
    }

    #[tokio::test]
    async fn a_failed_call_fails_each_of_its_queries_with_the_cause() {
        let embedder = recording(true);
        embedder.gate.add_permits(1);
        let batcher = QueryBatcher::new(embedder);
        let error = batcher.embed("pump").await.unwrap_err();
        assert!(matches!(error, ModelError::Timeout { .. }), "{error}");
    }
}
