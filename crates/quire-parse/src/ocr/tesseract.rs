//! Running the `tesseract` program on one page: the image goes in on stdin as PGM (no encoder
//! needed, and Leptonica reads it without a guess), the text comes back on stdout.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use image::GrayImage;

use super::OcrSettings;

/// How often a running page is checked for its end or its deadline.
const POLL: Duration = Duration::from_millis(10);
/// How much of Tesseract's stderr is kept for a failure's reason.
const STDERR_KEEP: usize = 2048;

/// Why a page was not read.
#[derive(Debug)]
pub(super) enum Failure {
    /// The page ran out of its time and the program was killed.
    TimedOut,
    /// The program could not start, or failed; the text says how.
    Failed(String),
}

/// A command for `program` with nothing of the caller's environment: the parse worker has
/// none to give, and Tesseract needs only its data directory and a single OpenMP thread (a
/// page at a time on a shared machine; more threads only add contention and address space).
fn command(program: &Path, tessdata_dir: Option<&Path>) -> Command {
    let mut command = Command::new(program);
    command.env_clear().env("OMP_THREAD_LIMIT", "1");
    if let Some(dir) = tessdata_dir {
        command.env("TESSDATA_PREFIX", dir);
    }
    command
}

/// Reads the text of `image` (already at `settings.dpi`), killing Tesseract after `timeout`.
pub(super) fn recognize(
    settings: &OcrSettings,
    image: &GrayImage,
    timeout: Duration,
) -> Result<String, Failure> {
    let started = Instant::now();
    let mut child = command(&settings.program, settings.tessdata_dir.as_deref())
        .args(["stdin", "stdout", "-l"])
        .arg(settings.language_arg())
        .args(["--dpi", &settings.dpi.to_string(), "--psm", "3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Failure::Failed(format!(
                "could not start {} ({e})",
                settings.program.display()
            ))
        })?;
    let mut pgm = format!("P5\n{} {}\n255\n", image.width(), image.height()).into_bytes();
    pgm.extend_from_slice(image.as_raw());
    let stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    // Three pipes at once: each end gets a thread, so a full pipe never stalls the others.
    let writer = thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A program that exits early shows in its status; the write error adds nothing.
            let _ = stdin.write_all(&pgm);
        }
    });
    let reader = thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_end(&mut text);
        }
        text
    });
    let errors = thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(err) = stderr.as_mut() {
            let _ = err.read_to_end(&mut text);
        }
        text
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                // Killing closes the pipes, which ends the three threads.
                let _ = child.kill();
                let _ = child.wait();
                let _ = (writer.join(), reader.join(), errors.join());
                return Err(Failure::TimedOut);
            }
            Ok(None) => thread::sleep(POLL),
            Err(e) => {
                let _ = child.kill();
                return Err(Failure::Failed(format!(
                    "could not wait for tesseract ({e})"
                )));
            }
        }
    };
    let _ = writer.join();
    let text = reader.join().unwrap_or_default();
    let stderr = errors.join().unwrap_or_default();
    if !status.success() {
        let stderr = String::from_utf8_lossy(&stderr);
        let tail: String = stderr
            .trim()
            .chars()
            .rev()
            .take(STDERR_KEEP)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(Failure::Failed(format!(
            "tesseract exited with {status}: {tail}"
        )));
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// What [`probe`] found out about a Tesseract installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    /// The first line of `tesseract --version` (`tesseract 5.3.0`).
    pub version: String,
    /// The languages it has data for.
    pub languages: Vec<String>,
}

/// Runs `program --version` and `program --list-langs` (with the same environment pages get),
/// and checks that every language in `wanted` is installed. The error says what is missing.
pub fn probe(
    program: &Path,
    tessdata_dir: Option<&Path>,
    wanted: &[String],
) -> Result<Probed, String> {
    let run = |arg: &str| {
        command(program, tessdata_dir)
            .arg(arg)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("could not run {} ({e})", program.display()))
    };
    let version = run("--version")?;
    if !version.status.success() {
        return Err(format!("{} --version failed", program.display()));
    }
    // Older releases print the version on stderr.
    let mut text = String::from_utf8_lossy(&version.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&version.stderr));
    let version = text.lines().next().unwrap_or("").trim().to_owned();
    let listed = run("--list-langs")?;
    let languages: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .skip(1) // "List of available languages in "/usr/share/…" (N):"
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|l| !languages.contains(l))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} has no data for the language(s) {} (installed: {}); install e.g. \
             tesseract-ocr-{}",
            program.display(),
            missing.join(", "),
            languages.join(", "),
            missing[0]
        ));
    }
    Ok(Probed { version, languages })
}
