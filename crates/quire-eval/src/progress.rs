//! Progress of long steps (ingesting a corpus, running the queries): a bar on a terminal, and
//! a plain line every few seconds otherwise (a log, CI), so a run is never minutes of silence
//! and a log is never thousands of redraws.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Time between two plain lines when the output is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Counts one step's units towards a known total and shows it.
pub(crate) struct Progress {
    label: String,
    total: u64,
    done: u64,
    started: Instant,
    shown: Shown,
}

enum Shown {
    /// A live bar (stderr is a terminal).
    Bar(ProgressBar),
    /// A line to `sink` at most every `every`.
    Plain {
        sink: Box<dyn Write + Send>,
        every: Duration,
        last: Instant,
    },
}

impl Progress {
    /// Starts showing `label`, out of `total` units, on stderr: a bar on a terminal, plain
    /// lines otherwise.
    pub(crate) fn new(label: &str, total: u64) -> Self {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{msg} [{bar:40}] {pos}/{len} ({per_sec}, {elapsed} elapsed, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_message(label.to_owned());
            Self::with(label, total, Shown::Bar(bar))
        } else {
            Self::plain(label, total, Box::new(std::io::stderr()), PLAIN_EVERY)
        }
    }

    /// Plain lines to `sink`, at most one per `every` (and one at the end).
    fn plain(label: &str, total: u64, sink: Box<dyn Write + Send>, every: Duration) -> Self {
        Self::with(
            label,
            total,
            Shown::Plain {
                sink,
                every,
                last: Instant::now(),
            },
        )
    }

    fn with(label: &str, total: u64, shown: Shown) -> Self {
        Self {
            label: label.to_owned(),
            total,
            done: 0,
            started: Instant::now(),
            shown,
        }
    }

    /// `n` more units are done.
    pub(crate) fn inc(&mut self, n: u64) {
        self.done += n;
        match &mut self.shown {
            Shown::Bar(bar) => bar.inc(n),
            Shown::Plain { every, last, .. } => {
                if last.elapsed() >= *every {
                    *last = Instant::now();
                    self.line(false);
                }
            }
        }
    }

    /// The step is over: the bar is cleared, or a last plain line says how long it took.
    pub(crate) fn finish(mut self) {
        match &self.shown {
            Shown::Bar(bar) => bar.finish_and_clear(),
            Shown::Plain { .. } => self.line(true),
        }
    }

    fn line(&mut self, last: bool) {
        let seconds = self.started.elapsed().as_secs_f64();
        let rate = self.done as f64 / seconds.max(1e-9);
        let text = format!(
            "{}: {}/{} ({rate:.1}/s, {seconds:.0} s{})",
            self.label,
            self.done,
            self.total,
            if last { ", done" } else { "" }
        );
        if let Shown::Plain { sink, .. } = &mut self.shown {
            // A progress line that cannot be written is no reason to stop a run.
            let _ = writeln!(sink, "{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    #[test]
    fn plain_lines_are_throttled_and_the_last_one_says_done() {
        let sink = Shared::default();
        let mut quiet = Progress::plain(
            "ingest",
            3,
            Box::new(sink.clone()),
            Duration::from_secs(3600),
        );
        quiet.inc(1);
        quiet.inc(2);
        quiet.finish();
        let lines = sink.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("ingest: 3/3 ("), "{lines:?}");
        assert!(lines[0].ends_with(", done)"), "{lines:?}");

        let sink = Shared::default();
        let mut chatty = Progress::plain("queries", 2, Box::new(sink.clone()), Duration::ZERO);
        chatty.inc(1);
        chatty.inc(1);
        chatty.finish();
        let lines = sink.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("queries: 1/2 ("), "{lines:?}");
        assert!(!lines[1].contains("done"), "{lines:?}");
    }
}
