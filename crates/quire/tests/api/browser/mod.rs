//! A small WebDriver client for end-to-end tests of the web interface: it starts Debian's
//! `chromedriver` on a free port, opens one headless Chromium session and speaks the W3C
//! WebDriver protocol over plain HTTP with `reqwest`. `scripts/browser-deps` installs both
//! binaries.
//!
//! Screenshots go to `$QUIRE_TEST_ARTIFACTS/screenshots/` (set by `scripts/test`), otherwise to
//! `test-artifacts/screenshots/` in the cargo target directory, so a failing run leaves
//! something to look at.

use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::{get, post};
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;

/// Where `scripts/browser-deps` puts Debian's packages.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// How long `find` keeps looking for an element that is not there yet.
const FIND_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// A cold first start of chromedriver (and of Chromium, inside session creation) takes seconds.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(20);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The key under which WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Why a browser operation failed.
pub enum BrowserError {
    /// `chromedriver` or `chromium` is not installed.
    NotInstalled(&'static str),
    /// Starting, or talking to, the driver process failed below the WebDriver protocol.
    Transport { command: String, detail: String },
    /// The driver answered with a WebDriver error, e.g. `no such element`.
    WebDriver {
        command: String,
        error: String,
        message: String,
    },
    /// A wait ran out; `detail` says what was last seen.
    Timeout { waiting_for: String, detail: String },
}

impl BrowserError {
    /// The WebDriver error code (`no such element`, `stale element reference`, ...), if any.
    pub fn webdriver_error(&self) -> Option<&str> {
        match self {
            Self::WebDriver { error, .. } => Some(error),
            Self::NotInstalled(_) | Self::Transport { .. } | Self::Timeout { .. } => None,
        }
    }
}

impl fmt::Display for BrowserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInstalled(path) => write!(
                f,
                "{path} is missing: run scripts/browser-deps to install chromium and chromium-driver"
            ),
            Self::Transport { command, detail } => write!(f, "{command}: {detail}"),
            Self::WebDriver {
                command,
                error,
                message,
            } if message.starts_with(error.as_str()) => write!(f, "{command}: {message}"),
            Self::WebDriver {
                command,
                error,
                message,
            } => write!(f, "{command}: {error}: {message}"),
            Self::Timeout {
                waiting_for,
                detail,
            } => write!(f, "timed out waiting for {waiting_for}: {detail}"),
        }
    }
}

/// Tests `unwrap` these errors, so `Debug` gives the readable message, e.g. the hint to run
/// `scripts/browser-deps`.
impl fmt::Debug for BrowserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for BrowserError {}

pub type BrowserResult<T> = Result<T, BrowserError>;

/// One headless Chromium session behind its own chromedriver process. Dropping it ends the
/// session and kills the driver; `quit` does the same and reports errors.
pub struct Browser {
    http: reqwest::Client,
    driver_addr: SocketAddr,
    session: Option<String>,
    driver: Child,
    /// Chromium's profile; removed after the driver is gone.
    _profile: TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub async fn start() -> BrowserResult<Self> {
        for binary in [CHROMEDRIVER, CHROMIUM] {
            if !Path::new(binary).exists() {
                return Err(BrowserError::NotInstalled(binary));
            }
        }
        let http = reqwest::Client::builder()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .map_err(|err| transport("building the HTTP client", err))?;
        // The free port is found by binding and releasing it, so another process may take it
        // before chromedriver does; a driver that exits at once gets a second port.
        let mut attempts = 0;
        let (driver, driver_addr) = loop {
            attempts += 1;
            match start_driver(&http).await {
                Ok(started) => break started,
                Err(err) if attempts < 3 && matches!(err, BrowserError::Transport { .. }) => {}
                Err(err) => return Err(err),
            }
        };
        let profile = tempfile::tempdir().map_err(|err| transport("creating a profile", err))?;
        let mut browser = Self {
            http,
            driver_addr,
            session: None,
            driver,
            _profile: profile,
        };
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless=new",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-quic",
                            "--no-first-run",
                            "--disable-background-networking",
                            "--disable-component-update",
                            "--disable-sync",
                            "--disable-dev-shm-usage",
                            "--window-size=1280,900",
                            format!("--user-data-dir={}", browser._profile.path().display()),
                        ],
                    },
                },
            },
        });
        let created = browser
            .request(Method::POST, "/session", Some(capabilities))
            .await?;
        let session = created["sessionId"]
            .as_str()
            .ok_or_else(|| unexpected("new session", &created))?;
        browser.session = Some(session.to_owned());
        Ok(browser)
    }

    /// Navigates to `url` and waits for the page to load.
    pub async fn goto(&self, url: &str) -> BrowserResult<()> {
        self.command(Method::POST, "/url", Some(json!({ "url": url })))
            .await
            .map(drop)
    }

    /// The address of the current page.
    pub async fn current_url(&self) -> BrowserResult<String> {
        let value = self.command(Method::GET, "/url", None).await?;
        string_value("current url", value)
    }

    /// The current page's HTML as the browser serialises it.
    pub async fn page_source(&self) -> BrowserResult<String> {
        let value = self.command(Method::GET, "/source", None).await?;
        string_value("page source", value)
    }

    /// The first element matching `css`, waiting up to 5 s for it to appear.
    pub async fn find(&self, css: &str) -> BrowserResult<Element<'_>> {
        let deadline = Instant::now() + FIND_TIMEOUT;
        loop {
            match self.find_now(css).await {
                Err(err) if not_there_yet(&err) && Instant::now() < deadline => {
                    tokio::time::sleep(POLL_INTERVAL).await;
                }
                found => return found,
            }
        }
    }

    /// Waits until the first element matching `css` contains `text` and returns it.
    pub async fn wait_for_text(
        &self,
        css: &str,
        text: &str,
        timeout: Duration,
    ) -> BrowserResult<Element<'_>> {
        let deadline = Instant::now() + timeout;
        loop {
            // The page may be replaced between finding the element and reading it.
            let seen = match self.find_now(css).await {
                Ok(element) => match element.text().await {
                    Ok(seen) if seen.contains(text) => return Ok(element),
                    Ok(seen) => format!("its text is {seen:?}"),
                    Err(err) if is_stale(&err) => err.to_string(),
                    Err(err) => return Err(err),
                },
                Err(err) if not_there_yet(&err) => err.to_string(),
                Err(err) => return Err(err),
            };
            if Instant::now() >= deadline {
                return Err(BrowserError::Timeout {
                    waiting_for: format!("{css} to contain {text:?}"),
                    detail: seen,
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Saves a PNG of the viewport. A relative `path` is taken under the artifacts directory
    /// (see the module docs); returns where the file was written.
    pub async fn screenshot(&self, path: impl AsRef<Path>) -> BrowserResult<PathBuf> {
        let value = self.command(Method::GET, "/screenshot", None).await?;
        let encoded = string_value("screenshot", value)?;
        let png = decode_base64(&encoded).ok_or_else(|| BrowserError::Transport {
            command: "screenshot".into(),
            detail: "the driver's screenshot is not valid base64".into(),
        })?;
        let path = screenshots_dir().join(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|err| transport(&format!("creating {}", dir.display()), err))?;
        }
        std::fs::write(&path, png)
            .map_err(|err| transport(&format!("writing {}", path.display()), err))?;
        Ok(path)
    }

    /// Ends the session, closing Chromium, and stops the driver.
    pub async fn quit(mut self) -> BrowserResult<()> {
        if let Some(session) = self.session.take() {
            self.request(Method::DELETE, &format!("/session/{session}"), None)
                .await?;
        }
        Ok(())
    }

    async fn find_now(&self, css: &str) -> BrowserResult<Element<'_>> {
        let body = json!({ "using": "css selector", "value": css });
        let value = self.command(Method::POST, "/element", Some(body)).await?;
        let id = value[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| unexpected("find element", &value))?;
        Ok(Element {
            browser: self,
            id: id.to_owned(),
        })
    }

    /// Sends a command to the current session and returns its `value`.
    async fn command(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> BrowserResult<Value> {
        let session = self
            .session
            .as_deref()
            .ok_or_else(|| BrowserError::Transport {
                command: path.to_owned(),
                detail: "the session has ended".into(),
            })?;
        self.request(method, &format!("/session/{session}{path}"), body)
            .await
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> BrowserResult<Value> {
        let command = format!("{method} {path}");
        let url = format!("http://{}{path}", self.driver_addr);
        let request = self.http.request(method.clone(), url);
        // POST commands must carry a JSON object even when they take no parameters.
        let request = match body {
            Some(body) => request.json(&body),
            None if method == Method::POST => request.json(&json!({})),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|err| transport(&command, err))?;
        let status = response.status();
        let mut body: Value = response
            .json()
            .await
            .map_err(|err| transport(&command, err))?;
        let value = body["value"].take();
        if status.is_success() {
            return Ok(value);
        }
        Err(BrowserError::WebDriver {
            command,
            error: value["error"]
                .as_str()
                .unwrap_or("unknown error")
                .to_owned(),
            message: value["message"]
                .as_str()
                .unwrap_or("(no message)")
                .to_owned(),
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that panicked never reached `quit`. Killing chromedriver alone would leave
        // Chromium running, so end the session first; with a blocking request, since drop
        // cannot await.
        if let Some(session) = self.session.take() {
            let _ = delete_session_blocking(self.driver_addr, &session);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An element of the current page.
pub struct Element<'a> {
    browser: &'a Browser,
    id: String,
}

impl Element<'_> {
    /// Clicks the element (scrolling it into view first).
    pub async fn click(&self) -> BrowserResult<()> {
        self.command(Method::POST, "/click", None).await.map(drop)
    }

    /// Types `text` into the element.
    pub async fn send_keys(&self, text: &str) -> BrowserResult<()> {
        self.command(Method::POST, "/value", Some(json!({ "text": text })))
            .await
            .map(drop)
    }

    /// The element's rendered text.
    pub async fn text(&self) -> BrowserResult<String> {
        let value = self.command(Method::GET, "/text", None).await?;
        string_value("element text", value)
    }

    /// The attribute `name`, or `None` when the element does not have it.
    pub async fn attr(&self, name: &str) -> BrowserResult<Option<String>> {
        match self
            .command(Method::GET, &format!("/attribute/{name}"), None)
            .await?
        {
            Value::Null => Ok(None),
            Value::String(value) => Ok(Some(value)),
            other => Err(unexpected("element attribute", &other)),
        }
    }

    async fn command(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> BrowserResult<Value> {
        let path = format!("/element/{}{path}", self.id);
        self.browser.command(method, &path, body).await
    }
}

/// Starts chromedriver on a free port and waits until it reports itself ready.
async fn start_driver(http: &reqwest::Client) -> BrowserResult<(Child, SocketAddr)> {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|err| transport("finding a free port", err))?;
    let mut driver = Command::new(CHROMEDRIVER)
        .arg(format!("--port={}", addr.port()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| transport(&format!("starting {CHROMEDRIVER}"), err))?;
    let status_url = format!("http://{addr}/status");
    let deadline = Instant::now() + DRIVER_START_TIMEOUT;
    loop {
        if let Ok(Some(exit)) = driver.try_wait() {
            return Err(BrowserError::Transport {
                command: format!("starting {CHROMEDRIVER} on {addr}"),
                detail: format!("it exited with {exit}"),
            });
        }
        if let Ok(response) = http.get(&status_url).send().await
            && let Ok(status) = response.json::<Value>().await
            && status["value"]["ready"] == Value::Bool(true)
        {
            return Ok((driver, addr));
        }
        if Instant::now() >= deadline {
            let _ = driver.kill();
            let _ = driver.wait();
            return Err(BrowserError::Timeout {
                waiting_for: format!("{CHROMEDRIVER} on {addr}"),
                detail: format!("{status_url} never reported ready"),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn delete_session_blocking(addr: SocketAddr, session: &str) -> std::io::Result<()> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "DELETE /session/{session} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    // The answer only comes once Chromium has closed; its first bytes are enough, and
    // chromedriver keeps the connection open afterwards despite `Connection: close`.
    let mut response = [0; 64];
    stream.read(&mut response).map(drop)
}

/// `$QUIRE_TEST_ARTIFACTS/screenshots`, or `test-artifacts/screenshots` in the target directory.
fn screenshots_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("QUIRE_TEST_ARTIFACTS") {
        return PathBuf::from(dir).join("screenshots");
    }
    // The test binary is `<target>/<profile>/deps/api-<hash>`.
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("test-artifacts").join("screenshots")
}

fn string_value(what: &str, value: Value) -> BrowserResult<String> {
    match value {
        Value::String(text) => Ok(text),
        other => Err(unexpected(what, &other)),
    }
}

fn transport(command: &str, err: impl fmt::Display) -> BrowserError {
    BrowserError::Transport {
        command: command.to_owned(),
        detail: err.to_string(),
    }
}

fn unexpected(command: &str, value: &Value) -> BrowserError {
    BrowserError::Transport {
        command: command.to_owned(),
        detail: format!("unexpected answer {value}"),
    }
}

/// Standard base64 with padding, as WebDriver sends screenshots.
fn decode_base64(encoded: &str) -> Option<Vec<u8>> {
    fn sextet(byte: u8) -> Option<u32> {
        Some(match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes: Vec<u8> = encoded
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace())
        .collect();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let padding = chunk.iter().rev().take_while(|&&byte| byte == b'=').count();
        if padding > 2 {
            return None;
        }
        let mut group = 0u32;
        for &byte in &chunk[..4 - padding] {
            group = group << 6 | sextet(byte)?;
        }
        group <<= 6 * padding as u32;
        out.extend_from_slice(&group.to_be_bytes()[1..4 - padding]);
    }
    Some(out)
}

// The client proves itself against a tiny page of its own.

const FORM: &str = r#"<!doctype html>
<html><head><title>Echo</title></head><body>
<form method="post" action="/echo">
  <input id="message" name="message" type="text">
  <button id="send" type="submit">Send</button>
</form>
</body></html>"#;

/// Answers the form with the submitted message, HTML-escaped.
async fn echo(body: String) -> Html<String> {
    let form = reqwest::Url::parse(&format!("http://form.invalid/?{body}")).unwrap();
    let message = form
        .query_pairs()
        .find(|(name, _)| name == "message")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    Html(format!(
        "<!doctype html><html><head><title>Echoed</title></head><body>\
         <p id=\"result\">You said: {escaped}</p></body></html>"
    ))
}

async fn serve_echo_page() -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { Html(FORM) }))
        .route("/echo", post(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[test]
fn base64_decodes_with_and_without_padding() {
    assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
    assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
    assert_eq!(decode_base64("aGV5").unwrap(), b"hey");
    assert_eq!(decode_base64("").unwrap(), b"");
    assert!(decode_base64("a*==").is_none());
}

#[tokio::test]
async fn a_page_is_driven_in_headless_chromium() {
    let site = serve_echo_page().await;
    let started = Instant::now();
    let browser = Browser::start().await.unwrap();
    eprintln!("browser started in {:?}", started.elapsed());

    browser.goto(&format!("http://{site}/")).await.unwrap();
    let input = browser.find("input[name=message]").await.unwrap();
    assert_eq!(input.attr("id").await.unwrap().as_deref(), Some("message"));
    assert_eq!(input.attr("data-missing").await.unwrap(), None);
    input.send_keys("hello & <quire>").await.unwrap();
    browser.find("#send").await.unwrap().click().await.unwrap();

    let result = browser
        .wait_for_text("#result", "hello & <quire>", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(result.text().await.unwrap(), "You said: hello & <quire>");
    assert_eq!(
        browser.current_url().await.unwrap(),
        format!("http://{site}/echo")
    );
    let source = browser.page_source().await.unwrap();
    assert!(source.contains("hello &amp; &lt;quire&gt;"), "{source}");

    let shot = browser.screenshot("browser-echo-page.png").await.unwrap();
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", shot.display());

    browser.quit().await.unwrap();
    eprintln!("whole browser test took {:?}", started.elapsed());
}

/// Whether `err` says the element was replaced while it was read: "stale element reference",
/// or, when the page navigates at that moment, Chromium's "unknown error" that the node "does
/// not belong to the document".
/// Whether a search for an element may succeed if tried again: the element is not there yet,
/// or the page was being replaced (after a click that navigates, Chromium aborts a search
/// that meets the navigation with "aborted by navigation").
fn not_there_yet(err: &BrowserError) -> bool {
    match err.webdriver_error() {
        Some("no such element") => true,
        Some(_) => err.to_string().contains("aborted by navigation"),
        None => false,
    }
}

fn is_stale(err: &BrowserError) -> bool {
    match err.webdriver_error() {
        Some("stale element reference") => true,
        Some("unknown error") => err.to_string().contains("does not belong to the document"),
        _ => false,
    }
}
