//! A minimal W3C WebDriver client (JSON over HTTP/1.1 on a std TcpStream) driving Debian's
//! `chromedriver` + headless `chromium`, for the dashboard's browser test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Debian's chromedriver (package `chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's chromium (package `chromium`).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A running chromedriver; killed on drop.
pub struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP request to `127.0.0.1:port`: (status, JSON body).
fn request(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect chromedriver: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("write: {e}"))?;
    // chromedriver may keep the connection open: read the head, then Content-Length bytes.
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut buf).map_err(|e| format!("read {method} {path}: {e}"))?;
        if n == 0 {
            return Err(format!("{method} {path}: connection closed in the head"));
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .ok_or_else(|| format!("{method} {path}: no Content-Length in {head:?}"))?;
    let mut body = raw[head_end + 4..].to_vec();
    while body.len() < len {
        let n = s.read(&mut buf).map_err(|e| format!("read {method} {path}: {e}"))?;
        if n == 0 {
            return Err(format!("{method} {path}: connection closed in the body"));
        }
        body.extend_from_slice(&buf[..n]);
    }
    let rest = String::from_utf8_lossy(&body[..len]);
    let v = serde_json::from_str(&rest).map_err(|e| format!("{method} {path}: not JSON ({e}): {rest:.300}"))?;
    Ok((status, v))
}

impl Driver {
    /// Starts chromedriver on a free port and waits until it is ready.
    pub fn start(port: u16, log: &Path) -> Driver {
        let logf = std::fs::File::create(log).expect("chromedriver log");
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::from(logf.try_clone().expect("log")))
            .stderr(Stdio::from(logf))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER} (apt-get install chromium chromium-driver): {e}"));
        let d = Driver { child, port };
        let t = Instant::now();
        loop {
            if let Ok((200, v)) = request(port, "GET", "/status", None) {
                if v["value"]["ready"] == json!(true) {
                    return d;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "chromedriver not ready within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A new headless Chromium session with a fresh profile in `profile`.
    pub fn session(&self, profile: &Path) -> Session {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,1100",
            &format!("--user-data-dir={}", profile.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let (st, v) = request(self.port, "POST", "/session", Some(&caps)).expect("new session");
        assert_eq!(st, 200, "new session refused: {v}");
        let id = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {v}"))
            .to_string();
        Session { port: self.port, id }
    }
}

/// A WebDriver session; deleted on drop.
pub struct Session {
    port: u16,
    id: String,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = request(self.port, "DELETE", &format!("/session/{}", self.id), None);
    }
}

impl Session {
    fn call(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}{what}", self.id);
        let (st, v) = request(self.port, method, &path, body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(st, 200, "{method} {what}: {v}");
        v["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub fn eval(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", Some(&json!({ "script": script, "args": [] })))
    }

    /// The viewport as PNG bytes.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let v = self.call("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64 screenshot"))
            .expect("screenshot is base64")
    }

    /// Evaluates `script` every 100 ms until `ok` holds on its value; panics with `what` and the
    /// last value after `within`.
    pub fn wait_for(&self, what: &str, within: Duration, script: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let v = self.eval(script);
            if ok(&v) {
                return v;
            }
            assert!(
                t.elapsed() < within,
                "the page did not show {what} within {within:?}; last: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
