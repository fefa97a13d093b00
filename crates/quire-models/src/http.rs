//! What the embedding client and the model download share: one way to build an HTTP client and
//! one translation of transport failures into [`ModelError`]s an operator can act on.

use std::error::Error as _;
use std::time::Duration;

use crate::ModelError;

/// A connection that cannot be made in this long will not be made: failing fast beats waiting
/// out a long request timeout on an address that drops packets.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client builder that identifies itself as Quire and gives up on connecting after
/// [`CONNECT_TIMEOUT`] (or `timeout`, when that is shorter).
pub(crate) fn client_builder(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .user_agent(concat!("quire/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(timeout.min(CONNECT_TIMEOUT))
}

/// Builds `builder`; fails only when the TLS setup fails.
pub(crate) fn build(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, ModelError> {
    builder
        .build()
        .map_err(|e| ModelError::Settings(format!("could not set up the HTTP client: {e}")))
}

/// Classifies a failed request: no connection, too slow, or something else on the way.
pub(crate) fn transport_error(url: &str, error: &reqwest::Error, timeout: Duration) -> ModelError {
    if error.is_timeout() {
        return ModelError::Timeout {
            url: url.to_owned(),
            seconds: timeout.as_secs_f64(),
        };
    }
    let reason = root_cause(error);
    if error.is_connect() {
        ModelError::Unreachable {
            url: url.to_owned(),
            reason,
        }
    } else {
        ModelError::Protocol {
            url: url.to_owned(),
            message: format!("the exchange failed: {reason}"),
        }
    }
}

/// reqwest's own message only says that sending failed; the innermost cause says why
/// ("Connection refused", "failed to lookup address", a certificate problem).
pub(crate) fn root_cause(error: &reqwest::Error) -> String {
    let mut messages = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !messages.iter().any(|m| m.contains(&text)) {
            messages.push(text);
        }
        source = cause.source();
    }
    // The first message names the URL, which the caller's error already shows.
    if messages.len() > 1 {
        messages.remove(0);
    }
    messages.join(": ")
}

/// The server's own explanation in a JSON error, wherever the OpenAI-compatible server family
/// puts it (OpenAI, Ollama, vLLM: `error.message`; llama.cpp, text-generation-inference and
/// text-embeddings-inference: `error` as a string; FastAPI servers: `detail`).
pub(crate) fn error_text(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    [
        value.pointer("/error/message"),
        value.get("error"),
        value.get("message"),
        value.get("detail"),
    ]
    .into_iter()
    .flatten()
    .find_map(|m| match m {
        Value::String(s) => Some(s.clone()),
        Value::Null | Value::Object(_) => None,
        other => Some(other.to_string()),
    })
}

/// What an error status's body says: its [`error_text`] when it is JSON that has one, else
/// its [`excerpt`].
pub(crate) fn explanation(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| error_text(&value))
        .unwrap_or_else(|| excerpt(body))
}

/// The start of a body for an error message: enough to recognise an HTML page or a proxy's
/// complaint, never a whole document.
pub(crate) fn excerpt(body: &[u8]) -> String {
    const LIMIT: usize = 200;
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
