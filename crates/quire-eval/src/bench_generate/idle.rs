//! Part 3 of `quire bench generate`: the memory of streams waiting in the generation queue.
//! They are opened on raw TCP connections with a hand-made request, so the client side, in
//! the same process, stays tiny.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ANSWER_TIMEOUT;
use super::events::find;
use super::fake_model::{FakeModel, Script};
use crate::bench_server::BenchServer;

/// `EMFILE`, "too many open files", on Linux and macOS.
const EMFILE: i32 = 24;

/// What part 3 measured.
pub(super) struct IdleReport {
    streams: usize,
    rss_before_kib: u64,
    rss_after_kib: u64,
    fds_before: usize,
    fds_after: usize,
    opened_in: Duration,
}

/// Part 3: one answer holds the only slot (the fake model waits), `n` more streams queue
/// behind it on raw TCP connections that read their first `queued` event and then sit idle;
/// this process's resident memory before and after.
pub(super) async fn idle_streams(
    server: &BenchServer,
    fake: &mut FakeModel,
    question: &str,
    n: usize,
) -> anyhow::Result<IdleReport> {
    ensure_fd_limit(n)?;
    fake.drain_arrivals();
    fake.set_script(Script {
        pieces: 1,
        gated: true,
    });
    let holder = super::ask(server, question).await?;
    tokio::time::timeout(ANSWER_TIMEOUT, fake.arrivals.recv())
        .await
        .context("the first answer never reached the model")?;
    let request = raw_generate_request(server, question);
    let rss_before_kib = rss_kib()?;
    let fds_before = open_fds()?;
    let started = Instant::now();
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        streams.push(open_idle_stream(server.addr, &request).await?);
    }
    let opened_in = started.elapsed();
    let rss_after_kib = rss_kib()?;
    let fds_after = open_fds()?;
    drop(streams);
    fake.release();
    holder.answer().await?.done()?;
    fake.drain_arrivals();
    Ok(IdleReport {
        streams: n,
        rss_before_kib,
        rss_after_kib,
        fds_before,
        fds_after,
        opened_in,
    })
}

/// Two descriptors per stream (client and server end) and some room: raises the soft limit
/// when the hard one allows, or says what to do.
fn ensure_fd_limit(streams: usize) -> anyhow::Result<()> {
    let needed = 2 * streams as u64 + 256;
    let limit = rlimit::increase_nofile_limit(needed)
        .context("could not read or raise the open-file limit")?;
    if limit < needed {
        bail!(
            "{streams} idle streams need about {needed} open files and the limit is {limit}: \
             run `ulimit -n {needed}` first, or pass a smaller --idle-streams"
        );
    }
    Ok(())
}

/// A hand-made HTTP/1.1 generate request, so idle streams cost no HTTP client buffers.
fn raw_generate_request(server: &BenchServer, question: &str) -> Vec<u8> {
    let body = json!({ "query": question }).to_string();
    format!(
        "POST /api/v1/generate HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.addr,
        server.client.secret(),
        body.len()
    )
    .into_bytes()
}

/// Sends `request` and reads until its first `queued` event; returns the open connection.
async fn open_idle_stream(addr: SocketAddr, request: &[u8]) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| {
        if e.raw_os_error() == Some(EMFILE) {
            anyhow!("too many open files: raise the limit (`ulimit -n 4096`) and run again")
        } else {
            anyhow!(e).context("could not connect to the server")
        }
    })?;
    stream.write_all(request).await?;
    let mut seen = Vec::with_capacity(1024);
    let mut buffer = [0u8; 512];
    let first_event = async {
        loop {
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                bail!("the server closed an idle stream before its first event");
            }
            seen.extend_from_slice(&buffer[..read]);
            if seen.len() >= 12 && !seen.starts_with(b"HTTP/1.1 200") {
                let head = String::from_utf8_lossy(&seen);
                bail!(
                    "an idle stream was refused: {}",
                    head.lines().next().unwrap_or("")
                );
            }
            if let Some(at) = find(&seen, b"event: queued") {
                if find(&seen[at..], b"\n\n").is_some() {
                    return Ok(());
                }
            } else if find(&seen, b"event:").is_some() {
                bail!(
                    "an idle stream was not queued: {}",
                    String::from_utf8_lossy(&seen)
                );
            }
        }
    };
    tokio::time::timeout(ANSWER_TIMEOUT, first_event)
        .await
        .context(
            "no `queued` event within 120 s (out of file descriptors? try `ulimit -n 4096`)",
        )??;
    Ok(stream)
}

/// This process's resident set size (`VmRSS` of `/proc/self/status`), in KiB.
fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("could not read /proc/self/status (the memory measurement needs Linux)")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/self/status")
}

/// Open file descriptors of this process.
fn open_fds() -> anyhow::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")
        .context("could not list /proc/self/fd")?
        .count())
}

impl IdleReport {
    pub(super) fn print(&self) {
        let added = self.rss_after_kib.saturating_sub(self.rss_before_kib);
        println!(
            "\nidle queued streams: {} behind one answer holding the only slot (max_concurrent 1)",
            self.streams
        );
        println!(
            "  RSS {:.1} MiB → {:.1} MiB: +{:.1} MiB, {:.1} KiB per stream; open files {} → {}; \
             opened in {:.1} s",
            self.rss_before_kib as f64 / 1024.0,
            self.rss_after_kib as f64 / 1024.0,
            added as f64 / 1024.0,
            added as f64 / self.streams.max(1) as f64,
            self.fds_before,
            self.fds_after,
            self.opened_in.as_secs_f64(),
        );
        println!(
            "  (the client side is in the same process but tiny: one raw TCP socket per stream, \
             headers and first event read, then idle; kernel socket buffers are not in RSS)"
        );
    }
}
