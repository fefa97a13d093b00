//! Server-Sent Events readers: the events of a streaming response (`/api/v1/generate`) as they
//! arrive, keep-alive comments skipped, and the JSON-RPC answer in an MCP response.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

/// One SSE event: its name and its JSON data.
#[derive(Debug, Clone)]
pub(crate) struct Sse {
    pub(crate) event: String,
    pub(crate) data: Value,
}

/// Reads an SSE response as it arrives; events come out of the channel in order and the
/// channel closes when the response ends.
pub(crate) fn sse_events(response: reqwest::Response) -> mpsc::UnboundedReceiver<Sse> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        while let Some(Ok(bytes)) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let mut event = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event = name.trim().to_owned();
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let data = serde_json::from_str(&data).expect("event data is JSON");
                if tx.send(Sse { event, data }).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Waits for the next non-keep-alive event.
pub(crate) async fn next(events: &mut mpsc::UnboundedReceiver<Sse>) -> Sse {
    tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("an event within 10 s")
        .expect("the stream is open")
}

/// The JSON-RPC answer in an MCP response, whose body is JSON or a stream of events.
pub(crate) fn json_rpc_answer(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("result").is_some() || message.get("error").is_some())
}
