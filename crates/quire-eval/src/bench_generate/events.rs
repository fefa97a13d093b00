//! The client side of a generate call: its event stream read as the bytes arrive, each event
//! stamped with its arrival.

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::{Context, bail};
use axum::body::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;

use super::ANSWER_TIMEOUT;

/// One server-sent event: its name, its JSON data and when its bytes arrived.
pub(super) struct Sse {
    event: String,
    data: Value,
    received: Instant,
}

/// Reads a generate response's events as their bytes arrive.
pub(super) struct EventReader {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    buffer: Vec<u8>,
    ready: VecDeque<Sse>,
}

/// What one whole answer streamed.
#[derive(Default)]
pub(super) struct Answer {
    /// `delta` texts with their arrival.
    pub(super) deltas: Vec<(String, Instant)>,
    /// The `done` event's data.
    pub(super) done: Option<Value>,
    /// The `error` event's message.
    error: Option<String>,
}

impl EventReader {
    pub(super) fn new(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
            ready: VecDeque::new(),
        }
    }

    /// The next event (keep-alive comments skipped); `None` when the response ends.
    async fn next(&mut self) -> anyhow::Result<Option<Sse>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            let Some(chunk) = self.body.next().await else {
                return Ok(None);
            };
            let chunk = chunk.context("the event stream broke")?;
            let received = Instant::now();
            self.buffer.extend_from_slice(&chunk);
            while let Some(end) = find(&self.buffer, b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse_event(&block, received)? {
                    self.ready.push_back(event);
                }
            }
        }
    }

    /// Reads the stream to its end.
    pub(super) async fn answer(mut self) -> anyhow::Result<Answer> {
        let mut answer = Answer::default();
        let read = async {
            while let Some(event) = self.next().await? {
                match event.event.as_str() {
                    "delta" => {
                        let text = event.data["text"].as_str().unwrap_or_default();
                        answer.deltas.push((text.to_owned(), event.received));
                    }
                    "done" => answer.done = Some(event.data),
                    "error" => answer.error = Some(event.data["message"].to_string()),
                    _ => {}
                }
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(ANSWER_TIMEOUT, read)
            .await
            .context("an answer took over 120 s")??;
        Ok(answer)
    }
}

impl Answer {
    /// The `done` event's data, or why there is none.
    pub(super) fn done(&self) -> anyhow::Result<&Value> {
        match (&self.done, &self.error) {
            (Some(done), _) => Ok(done),
            (None, Some(message)) => bail!("the answer failed: {message}"),
            (None, None) => bail!("the stream ended without `done`"),
        }
    }

    pub(super) fn text(&self) -> String {
        self.deltas.iter().map(|(text, _)| text.as_str()).collect()
    }
}

/// One event block; `None` for a comment (keep-alive).
fn parse_event(block: &[u8], received: Instant) -> anyhow::Result<Option<Sse>> {
    let block = std::str::from_utf8(block).context("an event is not UTF-8")?;
    let mut event = String::from("message");
    let mut data = String::new();
    for line in block.lines() {
        if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_owned();
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    if data.is_empty() {
        return Ok(None);
    }
    let data = serde_json::from_str(&data).with_context(|| format!("event data: {data:?}"))?;
    Ok(Some(Sse {
        event,
        data,
        received,
    }))
}

/// Where `needle` first occurs in `haystack`.
pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
