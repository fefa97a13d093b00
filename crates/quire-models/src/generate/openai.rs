//! A [`Generator`] backed by a server speaking OpenAI's `POST /v1/chat/completions` with
//! `stream: true`: OpenAI itself, Ollama, llama.cpp's server, vLLM and the like.
//!
//! The servers differ in small ways, each handled here rather than trusted: some ignore
//! `stream: true` and answer with one JSON document, llama.cpp sometimes closes the connection
//! after the finish reason without sending `[DONE]`, and each words its errors differently.
//! Every wait (for the response headers, and between two pieces of the stream) is bounded by
//! [`OpenAiChatSettings::timeout`], so a server that stalls cannot hang an answer.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{Stream, StreamExt, stream};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::Serialize;
use serde_json::Value;

use super::prompt::{ChatMessage, answer_messages, condense_messages};
use super::sse::SseDecoder;
use super::{GenerateError, Generator, Grounding, TextStream, Turn};
use crate::http::{client_builder, error_text, excerpt, explanation, root_cause};

/// Longest standalone question [`OpenAiChat::condense`] lets the model write: a question, not
/// an essay.
const CONDENSE_MAX_TOKENS: u32 = 128;

/// Settings of [`OpenAiChat`].
#[derive(Clone)]
pub struct OpenAiChatSettings {
    /// The API root, without `/chat/completions`: `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1` (Ollama), `http://localhost:8080/v1` (llama.cpp). A
    /// trailing `/` is fine.
    pub base_url: String,
    /// The model's name on the server.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set. Never printed: `Debug` shows it redacted.
    pub api_key: Option<String>,
    /// Longest wait for the response headers, and between two pieces of the stream.
    pub timeout: Duration,
    /// Sampling temperature.
    pub temperature: f32,
    /// Most tokens in an answer.
    pub max_tokens: u32,
}

/// Written by hand so the API key can never reach a log.
impl fmt::Debug for OpenAiChatSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChatSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

/// A client for `/v1/chat/completions` with `stream: true`. Cheap to clone: clones share the
/// connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    settings: OpenAiChatSettings,
    client: reqwest::Client,
    /// `{base_url}/chat/completions`, where requests go.
    endpoint: String,
    /// The endpoint without any password, for error messages.
    shown_url: String,
    /// `host[:port]`, for [`Generator::name`].
    authority: String,
}

impl OpenAiChat {
    /// A client for `settings`; checks the URL, does not contact the server.
    pub fn new(settings: OpenAiChatSettings) -> Result<Self, GenerateError> {
        let bad_url = |why: String| {
            GenerateError::Settings(format!(
                "base_url {:?} {why}; expected e.g. http://localhost:11434/v1",
                settings.base_url
            ))
        };
        let trimmed = settings.base_url.trim().trim_end_matches('/');
        let base =
            reqwest::Url::parse(trimmed).map_err(|e| bad_url(format!("is not a URL ({e})")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad_url("must start with http:// or https://".to_owned()));
        }
        let authority = match (base.host_str(), base.port()) {
            (Some(host), Some(port)) if !host.is_empty() => format!("{host}:{port}"),
            (Some(host), None) if !host.is_empty() => host.to_owned(),
            _ => return Err(bad_url("names no host".to_owned())),
        };
        if settings.model.trim().is_empty() {
            return Err(GenerateError::Settings(
                "the model name is empty".to_owned(),
            ));
        }
        if settings.max_tokens == 0 {
            return Err(GenerateError::Settings(
                "max_tokens must be at least 1".to_owned(),
            ));
        }
        if settings.timeout.is_zero() {
            return Err(GenerateError::Settings(
                "timeout must be longer than zero".to_owned(),
            ));
        }
        if !settings.temperature.is_finite() || settings.temperature < 0.0 {
            return Err(GenerateError::Settings(format!(
                "temperature must be a number from 0, not {}",
                settings.temperature
            )));
        }
        let endpoint = format!("{}/chat/completions", base.as_str().trim_end_matches('/'));
        let mut shown = base.clone();
        // Only fails for URLs that cannot have credentials, which were rejected above.
        let _ = shown.set_password(None);
        let shown_url = format!("{}/chat/completions", shown.as_str().trim_end_matches('/'));
        // No request timeout on the client: it would cut off a long answer that is still
        // streaming. The waits are bounded one by one instead.
        let client = client_builder(settings.timeout).build().map_err(|e| {
            GenerateError::Settings(format!("could not set up the HTTP client: {e}"))
        })?;
        Ok(Self {
            settings,
            client,
            endpoint,
            shown_url,
            authority,
        })
    }

    /// Sends `body` and waits for the response headers; an error status becomes
    /// [`GenerateError::Remote`] with the server's explanation.
    async fn send(
        &self,
        body: &ChatRequest<'_>,
        accept: &'static str,
    ) -> Result<reqwest::Response, GenerateError> {
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(ACCEPT, accept)
            .json(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = tokio::time::timeout(self.settings.timeout, request.send())
            .await
            .map_err(|_| self.timeout())?
            .map_err(|e| self.transport(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = self.body(response).await?;
        Err(GenerateError::Remote {
            url: self.shown_url.clone(),
            status: status.as_u16(),
            message: remote_message(status.as_u16(), &body),
        })
    }

    /// The whole body of `response`, within the timeout.
    async fn body(&self, response: reqwest::Response) -> Result<Vec<u8>, GenerateError> {
        let bytes = tokio::time::timeout(self.settings.timeout, response.bytes())
            .await
            .map_err(|_| self.timeout())?
            .map_err(|e| self.transport(&e))?;
        Ok(bytes.to_vec())
    }

    /// The text of a non-streamed answer (`choices[0].message.content`).
    fn whole_answer(&self, body: &[u8], content_type: &str) -> Result<String, GenerateError> {
        let value: Value = serde_json::from_slice(body).map_err(|_| {
            self.protocol(format!(
                "expected an event stream or JSON, got {content_type}: {}",
                excerpt(body)
            ))
        })?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(self.protocol(format!(
                "the server reported an error: {}",
                error_text(&value).unwrap_or_else(|| error.to_string())
            )));
        }
        value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                self.protocol(format!(
                    "the answer has no choices[0].message.content: {}",
                    excerpt(body)
                ))
            })
    }

    fn request_body<'a>(
        &'a self,
        messages: &'a [ChatMessage],
        stream: bool,
        temperature: f32,
        max_tokens: u32,
    ) -> ChatRequest<'a> {
        ChatRequest {
            model: &self.settings.model,
            messages: messages
                .iter()
                .map(|m| WireMessage {
                    role: m.role.as_str(),
                    content: &m.content,
                })
                .collect(),
            stream,
            temperature,
            max_tokens,
        }
    }

    fn timeout(&self) -> GenerateError {
        timeout_error(&self.shown_url, self.settings.timeout)
    }

    fn protocol(&self, message: String) -> GenerateError {
        GenerateError::Protocol {
            url: self.shown_url.clone(),
            message,
        }
    }

    /// Classifies a failed request: no connection, too slow, or something else on the way.
    fn transport(&self, error: &reqwest::Error) -> GenerateError {
        if error.is_timeout() {
            self.timeout()
        } else if error.is_connect() {
            GenerateError::Unreachable {
                url: self.shown_url.clone(),
                reason: root_cause(error),
            }
        } else {
            self.protocol(format!("the exchange failed: {}", root_cause(error)))
        }
    }
}

#[async_trait]
impl Generator for OpenAiChat {
    fn name(&self) -> String {
        format!("{} at {}", self.settings.model, self.authority)
    }

    fn is_extractive(&self) -> bool {
        false
    }

    /// One non-streamed request at temperature 0; `None` without asking when there is no
    /// history, or when the model answers nothing.
    async fn condense(
        &self,
        history: &[Turn],
        question: &str,
    ) -> Result<Option<String>, GenerateError> {
        if history.is_empty() {
            return Ok(None);
        }
        let messages = condense_messages(history, question);
        let body = self.request_body(&messages, false, 0.0, CONDENSE_MAX_TOKENS);
        let response = self.send(&body, "application/json").await?;
        let content_type = content_type(&response);
        let answer = self.body(response).await?;
        let text = self.whole_answer(&answer, &content_type)?;
        let text = unquote(&text);
        Ok((!text.is_empty()).then(|| text.to_owned()))
    }

    async fn answer(&self, grounding: &Grounding) -> Result<TextStream, GenerateError> {
        let messages = answer_messages(grounding);
        let body = self.request_body(
            &messages,
            true,
            self.settings.temperature,
            self.settings.max_tokens,
        );
        let response = self.send(&body, "text/event-stream").await?;
        let content_type = content_type(&response);
        let is_event_stream = content_type
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/event-stream"));
        if !is_event_stream {
            // Some servers ignore `stream: true` and send the whole answer at once.
            let answer = self.body(response).await?;
            let text = self.whole_answer(&answer, &content_type)?;
            let pieces = (!text.is_empty()).then_some(Ok(text));
            return Ok(Box::pin(stream::iter(pieces)));
        }
        // The byte stream owns the response: dropping the returned stream drops it and closes
        // the connection, which is how a cancelled answer stops the server's work.
        let bytes = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(|e| root_cause(&e)));
        Ok(text_stream(Pieces::new(
            Box::pin(bytes),
            self.shown_url.clone(),
            self.settings.timeout,
        )))
    }
}

/// The request body; fields every OpenAI-compatible server knows.
#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    temperature: f32,
    max_tokens: u32,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a str,
}

/// The stream of text pieces `pieces` reads. It ends after its first error: the state is
/// dropped then, and with it the response.
fn text_stream<S, B>(pieces: Pieces<S>) -> TextStream
where
    S: Stream<Item = Result<B, String>> + Unpin + Send + 'static,
    B: AsRef<[u8]>,
{
    Box::pin(stream::unfold(Some(pieces), |state| async move {
        let mut pieces = state?;
        match pieces.next_piece().await? {
            Ok(text) => Some((Ok(text), Some(pieces))),
            Err(error) => Some((Err(error), None)),
        }
    }))
}

/// Reads the text pieces of a chat-completions event stream from `bytes`, the body's chunks
/// (or why reading failed).
struct Pieces<S> {
    bytes: S,
    decoder: SseDecoder,
    /// Data of events decoded but not yet handled.
    events: VecDeque<String>,
    /// A finish reason arrived: the answer is complete even if `[DONE]` never comes.
    finished: bool,
    /// The body has ended.
    ended: bool,
    url: String,
    timeout: Duration,
}

/// What one event means.
enum Event {
    Text(String),
    Nothing,
    Done,
    Failed(GenerateError),
}

impl<S, B> Pieces<S>
where
    S: Stream<Item = Result<B, String>> + Unpin,
    B: AsRef<[u8]>,
{
    fn new(bytes: S, url: String, timeout: Duration) -> Self {
        Self {
            bytes,
            decoder: SseDecoder::new(),
            events: VecDeque::new(),
            finished: false,
            ended: false,
            url,
            timeout,
        }
    }

    /// The next piece of text, an error, or `None` when the answer is complete.
    async fn next_piece(&mut self) -> Option<Result<String, GenerateError>> {
        loop {
            while let Some(data) = self.events.pop_front() {
                match self.event(&data) {
                    Event::Text(text) => return Some(Ok(text)),
                    Event::Nothing => {}
                    Event::Done => return None,
                    Event::Failed(error) => return Some(Err(error)),
                }
            }
            if self.ended {
                return self.cut_short("the server closed the stream");
            }
            match tokio::time::timeout(self.timeout, self.bytes.next()).await {
                Ok(Some(Ok(chunk))) => self.events.extend(self.decoder.push(chunk.as_ref())),
                Ok(Some(Err(reason))) => {
                    return self.cut_short(&format!("the connection failed: {reason}"));
                }
                Ok(None) => {
                    self.ended = true;
                    // A last event without its blank line counts only if it is whole; a
                    // truncated one is the interruption reported next.
                    if let Some(last) = self.decoder.finish() {
                        let last_is_whole =
                            last.trim() == "[DONE]" || serde_json::from_str::<Value>(&last).is_ok();
                        if last_is_whole {
                            self.events.push_back(last);
                        }
                    }
                }
                // After the finish reason the answer is whole; only the formalities are late.
                Err(_) if self.finished => return None,
                Err(_) => return Some(Err(timeout_error(&self.url, self.timeout))),
            }
        }
    }

    /// The end of a stream that stopped early: normal after a finish reason, else an error.
    fn cut_short(&self, reason: &str) -> Option<Result<String, GenerateError>> {
        if self.finished {
            return None;
        }
        Some(Err(GenerateError::Interrupted {
            url: self.url.clone(),
            reason: format!("{reason} before [DONE] or a finish reason"),
        }))
    }

    /// Reads one event's data: a chunk with `choices[0].delta.content`, `[DONE]`, or an error.
    fn event(&mut self, data: &str) -> Event {
        let data = data.trim();
        if data.is_empty() {
            return Event::Nothing;
        }
        if data == "[DONE]" {
            return Event::Done;
        }
        let value: Value = match serde_json::from_str(data) {
            Ok(value) => value,
            Err(e) => {
                return Event::Failed(GenerateError::Protocol {
                    url: self.url.clone(),
                    message: format!("an event is not JSON ({e}): {}", excerpt(data.as_bytes())),
                });
            }
        };
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Event::Failed(stream_error(&self.url, &value, error));
        }
        // Usage chunks have no choices, the first chunk often only a role: neither is text.
        let choice = value.pointer("/choices/0");
        if choice
            .and_then(|c| c.get("finish_reason"))
            .is_some_and(|reason| !reason.is_null())
        {
            self.finished = true;
        }
        match choice
            .and_then(|c| c.pointer("/delta/content"))
            .and_then(Value::as_str)
        {
            Some(text) if !text.is_empty() => Event::Text(text.to_owned()),
            _ => Event::Nothing,
        }
    }
}

/// An error the server sent inside the stream: [`GenerateError::Remote`] when it carries an
/// HTTP status as its code (vLLM does), else [`GenerateError::Protocol`].
fn stream_error(url: &str, chunk: &Value, error: &Value) -> GenerateError {
    let message = error_text(chunk).unwrap_or_else(|| error.to_string());
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code));
    match status {
        Some(status) => GenerateError::Remote {
            url: url.to_owned(),
            status,
            message,
        },
        None => GenerateError::Protocol {
            url: url.to_owned(),
            message: format!("the server reported an error: {message}"),
        },
    }
}

fn timeout_error(url: &str, timeout: Duration) -> GenerateError {
    GenerateError::Timeout {
        url: url.to_owned(),
        seconds: timeout.as_secs_f64(),
    }
}

/// The response's `Content-Type`, or `(no content type)`.
fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(no content type)")
        .to_owned()
}

/// The explanation of an error status, with a hint for the statuses that usually mean a
/// setting is wrong.
fn remote_message(status: u16, body: &[u8]) -> String {
    let text = explanation(body);
    let hint = match status {
        401 | 403 => " (check the API key)",
        404 => " (check that base_url is the API root, such as …/v1, and the model name)",
        _ => "",
    };
    format!("{text}{hint}")
}

/// `text` trimmed, without the quotes models like to put around a rewritten question.
fn unquote(text: &str) -> &str {
    let text = text.trim();
    for (open, close) in [('"', '"'), ('\'', '\''), ('“', '”'), ('«', '»'), ('`', '`')] {
        if let Some(inner) = text
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
        {
            return inner.trim();
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://fake/v1/chat/completions";

    /// Every item of a stream over `chunks` (then `end`, if any, as a read error).
    async fn run(chunks: &[&str], end: Option<&str>) -> Vec<Result<String, GenerateError>> {
        let mut items: Vec<Result<Vec<u8>, String>> =
            chunks.iter().map(|c| Ok(c.as_bytes().to_vec())).collect();
        items.extend(end.map(|e| Err(e.to_owned())));
        let source = stream::iter(items);
        text_stream(Pieces::new(source, URL.into(), Duration::from_secs(5)))
            .collect()
            .await
    }

    fn chunk(content: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}}]})
        )
    }

    const FINISH: &str =
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";

    #[tokio::test]
    async fn content_pieces_come_out_in_order_until_done() {
        let items = run(
            &[
                "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
                &chunk("Hello"),
                &chunk(""),
                &chunk(" world"),
                FINISH,
                "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n",
                "data: [DONE]\n\n",
                &chunk("after done"),
            ],
            None,
        )
        .await;
        assert_eq!(items, [Ok("Hello".into()), Ok(" world".into())]);
    }

    #[tokio::test]
    async fn an_end_without_done_or_finish_reason_is_an_interruption() {
        let items = run(&[&chunk("a")], None).await;
        assert!(matches!(items[1], Err(GenerateError::Interrupted { .. })));
        assert_eq!(items.len(), 2);
        let items = run(&[&chunk("a")], Some("connection reset")).await;
        assert!(
            matches!(&items[1], Err(GenerateError::Interrupted { reason, .. }) if reason.contains("connection reset"))
        );
    }

    #[tokio::test]
    async fn a_finish_reason_makes_the_answer_complete_without_done() {
        assert_eq!(run(&[&chunk("a"), FINISH], None).await, [Ok("a".into())]);
        let failed = run(&[&chunk("a"), FINISH], Some("reset")).await;
        assert_eq!(failed, [Ok("a".into())]);
    }

    #[tokio::test]
    async fn a_last_event_without_its_blank_line_counts_only_when_whole() {
        assert_eq!(
            run(&[&chunk("a"), "data: [DONE]"], None).await,
            [Ok("a".into())]
        );
        let truncated = run(&[&chunk("a"), "data: {\"choi"], None).await;
        assert!(matches!(
            truncated[1],
            Err(GenerateError::Interrupted { .. })
        ));
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error_naming_it_and_ends_the_stream() {
        let items = run(&["data: {not json\n\n", &chunk("never")], None).await;
        assert_eq!(items.len(), 1);
        assert!(
            matches!(&items[0], Err(GenerateError::Protocol { message, .. }) if message.contains("{not json"))
        );
    }

    #[tokio::test]
    async fn an_error_event_ends_the_stream_with_its_message() {
        let items = run(
            &[
                &chunk("a"),
                "data: {\"error\":{\"message\":\"overloaded\",\"code\":503}}\n\n",
            ],
            None,
        )
        .await;
        assert_eq!(items.len(), 2);
        assert!(
            matches!(&items[1], Err(GenerateError::Remote { status: 503, message, .. }) if message == "overloaded")
        );
        let items = run(&["data: {\"error\":\"busy\"}\n\n"], None).await;
        assert!(
            matches!(&items[0], Err(GenerateError::Protocol { message, .. }) if message.contains("busy"))
        );
    }

    #[test]
    fn error_bodies_are_read_in_every_shape() {
        assert_eq!(
            remote_message(500, br#"{"error":{"message":"model not loaded"}}"#),
            "model not loaded"
        );
        assert_eq!(remote_message(500, br#"{"error":"boom"}"#), "boom");
        assert_eq!(
            remote_message(502, b"<html>Bad Gateway</html>"),
            "<html>Bad Gateway</html>"
        );
        assert!(remote_message(401, b"{}").ends_with("(check the API key)"));
    }

    #[test]
    fn quotes_around_a_condensed_question_are_removed() {
        assert_eq!(
            unquote("  \"What are its side effects?\"\n"),
            "What are its side effects?"
        );
        assert_eq!(unquote("“Why?”"), "Why?");
        assert_eq!(unquote("It's \"quoted\" inside"), "It's \"quoted\" inside");
        assert_eq!(unquote("\"\""), "");
    }
}
