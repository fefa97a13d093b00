//! An incremental Server-Sent Events decoder: fed the body's bytes as the network delivers
//! them, it returns the `data` of each complete event.
//!
//! Bytes, not text, are buffered until a line is complete, because a network chunk can end in
//! the middle of a UTF-8 character. Only what a chat-completions stream needs is kept: `data`
//! fields (several lines of one event joined with `\n`, as the SSE specification says);
//! comments and the `event`, `id` and `retry` fields are skipped.

/// Turns a byte stream into the data of its events.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// Bytes of the line not yet ended.
    pending: Vec<u8>,
    /// The current event's data, each line followed by `\n`.
    data: String,
    /// True once the event has a `data` field, even an empty one.
    has_data: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds the next `bytes` of the stream and returns the data of every event they complete,
    /// in order.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some((end, next)) = line_end(&self.pending[start..]) {
            let line = String::from_utf8_lossy(&self.pending[start..start + end]).into_owned();
            start += next;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        // One drain per push rather than per line keeps a chunk of many lines linear.
        self.pending.drain(..start);
        events
    }

    /// At the end of the stream: the event the server left without its closing blank line,
    /// if any. The specification discards it, but some servers end with `data: [DONE]` and
    /// no newline, and the caller can tell a complete event from a truncated one.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let rest = rest.strip_suffix(b"\r").unwrap_or(&rest);
        let mut event = None;
        if !rest.is_empty() {
            event = self.line(&String::from_utf8_lossy(rest));
        }
        event.or_else(|| self.line(""))
    }

    /// Handles one line; a blank line ends the event and returns its data.
    fn line(&mut self, line: &str) -> Option<String> {
        if line.is_empty() {
            if !std::mem::take(&mut self.has_data) {
                return None;
            }
            let mut data = std::mem::take(&mut self.data);
            data.pop();
            return Some(data);
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            self.data.push_str(value);
            self.data.push('\n');
            self.has_data = true;
        }
        None
    }
}

/// Where the first line of `bytes` ends: the line's length and where the next line starts.
/// A line ends at `\n`, `\r\n` or a lone `\r`; a `\r` that ends the buffer waits for the next
/// chunk, which may start with its `\n`.
fn line_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let at = bytes.iter().position(|&b| b == b'\n' || b == b'\r')?;
    if bytes[at] == b'\n' {
        return Some((at, at + 1));
    }
    match bytes.get(at + 1) {
        Some(b'\n') => Some((at, at + 2)),
        Some(_) => Some((at, at + 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk));
        }
        events.extend(decoder.finish());
        events
    }

    #[test]
    fn events_end_at_a_blank_line() {
        let events = decode_all(&[b"data: one\n\ndata: two\n\n"]);
        assert_eq!(events, ["one", "two"]);
    }

    #[test]
    fn several_data_lines_are_joined_with_newlines() {
        let events = decode_all(&[b"data: first\ndata:second\ndata\n\n"]);
        assert_eq!(events, ["first\nsecond\n"]);
    }

    #[test]
    fn comments_and_other_fields_are_skipped() {
        let body = b": keep-alive\nevent: message\nid: 7\nretry: 1000\ndata: x\n\n: ping\n\n";
        assert_eq!(decode_all(&[body]), ["x"]);
    }

    #[test]
    fn only_one_space_after_the_colon_is_removed() {
        assert_eq!(decode_all(&[b"data:  two spaces\n\n"]), [" two spaces"]);
    }

    #[test]
    fn an_empty_data_field_still_makes_an_event() {
        assert_eq!(decode_all(&[b"data:\n\n"]), [""]);
    }

    #[test]
    fn crlf_and_lone_cr_end_lines() {
        assert_eq!(
            decode_all(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn a_cr_at_the_end_of_a_chunk_waits_for_its_lf() {
        // Read as a lone CR, the LF would be a second line end: an empty event in between.
        let events = decode_all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(events, ["a", "b"]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let body = "data: {\"c\":\"é日本\"}\r\n\r\n: note\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        let bytes = body.as_bytes();
        let whole = decode_all(&[bytes]);
        assert_eq!(whole, ["{\"c\":\"é日本\"}", "x\ny", "[DONE]"]);
        for first in 0..bytes.len() {
            for second in first..bytes.len() {
                let chunks = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                assert_eq!(decode_all(&chunks), whole, "split at {first} and {second}");
            }
        }
    }

    #[test]
    fn a_split_multibyte_character_is_not_mangled() {
        let text = "data: 日本\n\n".as_bytes();
        // Inside the first character's three bytes.
        assert_eq!(decode_all(&[&text[..7], &text[7..]]), ["日本"]);
    }

    #[test]
    fn finish_returns_an_event_without_its_blank_line() {
        assert_eq!(decode_all(&[b"data: [DONE]"]), ["[DONE]"]);
        assert_eq!(decode_all(&[b"data: [DONE]\n"]), ["[DONE]"]);
        assert_eq!(decode_all(&[b"data: [DONE]\r"]), ["[DONE]"]);
        assert!(decode_all(&[b": only a comment"]).is_empty());
        assert!(decode_all(&[b""]).is_empty());
    }
}
