//! A worker's stderr, read while it runs: its page lines become the document's progress, and
//! the rest is its log, of which the end is kept (an abort's reason is printed last).

use tokio::io::{AsyncRead, AsyncReadExt};

use super::parent::PagesRead;
use super::protocol::{PAGE_LINE, page_report};

/// How much of the end of the worker's stderr is kept: an abort's reason is printed last.
pub(super) const STDERR_TAIL_BYTES: usize = 16 * 1024;

/// Reads `stream` to its end, keeping only the last `keep` bytes; page lines go to `pages`.
pub(super) async fn read_stderr(
    stream: Option<impl AsyncRead + Unpin>,
    keep: usize,
    pages: &PagesRead,
) -> Vec<u8> {
    let mut tail = StderrTail::new(keep);
    if let Some(stream) = stream {
        stderr_lines(stream, |line| tail.route(line, Some(pages))).await;
    }
    tail.into_bytes()
}

/// Reads `stream` to its end, handing each line to `line_read` (a line longer than any page
/// line in pieces: page lines are short, anything longer is log text).
pub(super) async fn stderr_lines(
    mut stream: impl AsyncRead + Unpin,
    mut line_read: impl FnMut(&[u8]),
) {
    let mut buffer = [0_u8; 8192];
    let mut line = Vec::new();
    while let Ok(n @ 1..) = stream.read(&mut buffer).await {
        for &byte in &buffer[..n] {
            line.push(byte);
            if byte == b'\n' || line.len() > 4 * PAGE_LINE.len() {
                line_read(&line);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        line_read(&line);
    }
}

/// The last bytes of a worker's log lines.
#[derive(Debug)]
pub(super) struct StderrTail {
    bytes: Vec<u8>,
    keep: usize,
}

impl StderrTail {
    pub(super) fn new(keep: usize) -> Self {
        Self {
            bytes: Vec::new(),
            keep,
        }
    }

    /// Sends a page line to `pages` (dropped when nobody watches), and keeps any other line.
    pub(super) fn route(&mut self, line: &[u8], pages: Option<&PagesRead>) {
        match page_report(line) {
            Some(report) => {
                if let Some(pages) = pages {
                    pages.send_replace(Some(report));
                }
            }
            None => self.push(line),
        }
    }

    fn push(&mut self, line: &[u8]) {
        self.bytes.extend_from_slice(line);
        // Trimmed in steps, not at every line.
        if self.bytes.len() > 2 * self.keep {
            self.bytes.drain(..self.bytes.len() - self.keep);
        }
    }

    pub(super) fn into_bytes(mut self) -> Vec<u8> {
        if self.bytes.len() > self.keep {
            self.bytes.drain(..self.bytes.len() - self.keep);
        }
        self.bytes
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn page_lines_on_the_workers_stderr_are_progress_and_the_rest_is_its_log() {
        let stderr = b"quire-parse-pages 1/5\nstarting\nquire-parse-pages 2/5\nquire-parse-pages x/5\nthread panicked: boom";
        let (pages, read) = tokio::sync::watch::channel(None);
        let tail = read_stderr(Some(&stderr[..]), 1024, &pages).await;
        assert_eq!(*read.borrow(), Some((2, 5)));
        assert_eq!(
            String::from_utf8(tail).unwrap(),
            "starting\nquire-parse-pages x/5\nthread panicked: boom"
        );
        assert_eq!(page_report(b"quire-parse-pages 12/600\n"), Some((12, 600)));
        assert_eq!(page_report(b"quire-parse-pages 12\n"), None);
        assert_eq!(page_report(b"other 1/2\n"), None);
    }

    #[test]
    fn only_the_stderr_tail_is_kept() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let long: Vec<u8> = (0..100_000_u32).map(|i| (i % 251) as u8).collect();
        let pages = tokio::sync::watch::channel(None).0;
        let tail = runtime.block_on(read_stderr(Some(long.as_slice()), 1000, &pages));
        assert_eq!(tail, &long[long.len() - 1000..]);
    }
}
