//! The live dashboard in a real browser: fabricd (mock driver) serves the page on its
//! Prometheus listener; Debian's headless Chromium, driven over W3C WebDriver by chromedriver,
//! loads it; a link-down injected over gRPC must appear on the page **without a reload** (the
//! page follows the daemon's server-sent events): the new generation, the down port, then an
//! excluded (virtual) link and the heatmap of the new generation. A screenshot is decoded and
//! checked for content and for the health colours.
//!
//! Needs `chromium` and `chromium-driver` (tests/run-all.sh installs them); fails without them.

mod common;
#[path = "dashboard_support/webdriver.rs"]
mod webdriver;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// 4 leaves of 4 end ports, 4 spines.
const FABRIC: &str = "PGFT(2;4,4;1,4;1,1)";

/// What the test reads from the page.
const PAGE_STATE: &str = r#"
const live = document.getElementById('live');
return {
  generation: document.getElementById('generation').textContent,
  live: live ? live.dataset.state : '',
  problems: [...document.querySelectorAll('#problems tr[data-port]')].map(r => r.dataset.port + ' ' + r.dataset.kind),
  loads: document.getElementById('loads-note').textContent,
  canvases: document.querySelectorAll('#health canvas').length,
  heatmaps: document.querySelectorAll('#heatmap canvas').length,
  timeline: document.querySelectorAll('#timeline tr').length,
  marker: window.__fabricdTestMarker || 0,
};"#;

fn daemon(dir: &std::path::Path, port: u16) -> Daemon {
    let mut opts = Opts::new(FABRIC);
    opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");
    Daemon::spawn(dir, &opts, &[])
}

fn has(v: &Value, problem: &str) -> bool {
    v["problems"]
        .as_array()
        .is_some_and(|a| a.iter().any(|p| p.as_str() == Some(problem)))
}

/// Decodes a PNG into (width, height, RGB pixels).
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<[u8; 3]>) {
    let mut reader = png::Decoder::new(bytes).read_info().expect("screenshot is a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG frame");
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "8-bit screenshot");
    let step = info.color_type.samples();
    assert!(step >= 3, "colour screenshot, got {:?}", info.color_type);
    let px = buf[..info.buffer_size()]
        .chunks_exact(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width, info.height, px)
}

#[test]
fn page_follows_a_link_down_without_reload() {
    let dir = test_dir("dashboard-browser");
    let prom = free_port();
    let d = daemon(&dir, prom);
    run_with_deadline(240, async move {
        let mut c = d.ready().await;
        let g0 = status(&mut c).await.generation;
        let links = switch_links(&topology(&mut c).await);
        let (down_sw, down_port) = links[0];
        let (excl_sw, excl_port) = *links.last().expect("links");
        assert_ne!(down_sw, excl_sw);

        let driver = webdriver::Driver::start(free_port(), &dir.join("chromedriver.log"));
        let profile = dir.join("chromium-profile");
        std::fs::create_dir_all(&profile).expect("profile dir");
        let s = driver.session(&profile);
        s.goto(&format!("http://127.0.0.1:{prom}/"));
        let v = s.wait_for(
            "the installed generation, live",
            Duration::from_secs(30),
            PAGE_STATE,
            |v| {
                v["generation"] == Value::String(g0.to_string())
                    && v["live"] == "live"
                    && v["canvases"] == 2
                    && v["loads"]
                        .as_str()
                        .is_some_and(|l| l.contains(&format!("generation {g0},")))
            },
        );
        // The first refreshes are over: what changes from now on comes from the events.
        std::thread::sleep(Duration::from_millis(500));
        assert!(v["problems"].as_array().is_some_and(Vec::is_empty), "{v}");
        // Set in the page: a reload would lose it.
        s.eval("window.__fabricdTestMarker = 42; return 0;");

        // A physical link-down: both ends down, a new generation.
        let r = c
            .inject_fault(link_req(down_sw, down_port, false, true, true))
            .await
            .expect("inject link-down")
            .into_inner();
        assert!(r.generation > g0);
        let want = format!("0x{down_sw:016x}:{down_port} port-down");
        let v = s.wait_for(
            &format!("generation {} and {want}", r.generation),
            Duration::from_secs(20),
            PAGE_STATE,
            |v| v["generation"] == Value::String(r.generation.to_string()) && has(v, &want),
        );
        assert_eq!(v["marker"], 42, "the page was reloaded: {v}");

        // A virtual link-down: the link is excluded from routing; the heatmap follows.
        let r2 = c
            .inject_fault(link_req(excl_sw, excl_port, false, false, true))
            .await
            .expect("inject virtual link-down")
            .into_inner();
        assert!(r2.generation > r.generation);
        let want2 = format!("0x{excl_sw:016x}:{excl_port} excluded");
        let v = s.wait_for(
            &format!("generation {}, {want2} and its heatmap", r2.generation),
            Duration::from_secs(30),
            PAGE_STATE,
            |v| {
                v["generation"] == Value::String(r2.generation.to_string())
                    && has(v, &want2)
                    && has(v, &want)
                    && v["loads"]
                        .as_str()
                        .is_some_and(|l| l.contains(&format!("generation {},", r2.generation)))
            },
        );
        assert_eq!(v["marker"], 42, "the page was reloaded: {v}");
        assert!(v["heatmaps"].as_u64() >= Some(2), "one heatmap per level: {v}");
        assert!(
            v["timeline"].as_u64() >= Some(4),
            "phases and commits in the timeline: {v}"
        );

        let png = s.screenshot();
        let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
        std::fs::write(&out, &png).expect("save screenshot");
        eprintln!("screenshot: {}", out.display());
        let (w, h, px) = decode_png(&png);
        assert!(w >= 1000 && h >= 800, "screenshot of {w}x{h}");
        let mut counts: HashMap<[u8; 3], usize> = HashMap::new();
        for p in &px {
            *counts.entry(*p).or_default() += 1;
        }
        let background = counts.values().copied().max().unwrap_or(0);
        let distinct: HashSet<_> = counts.keys().collect();
        assert!(distinct.len() >= 20, "only {} colours: a blank page?", distinct.len());
        assert!(
            background * 10 < px.len() * 9,
            "one colour covers {background} of {} pixels: a blank page?",
            px.len()
        );
        // The health grid draws the down ports red, the excluded ones purple, the others green.
        for (name, rgb) in [
            ("down", [0xd6, 0x40, 0x3a]),
            ("excluded", [0xa0, 0x5a, 0xd8]),
            ("up", [0x2e, 0x9e, 0x5b]),
        ] {
            assert!(
                counts.get(&rgb).copied().unwrap_or(0) >= 10,
                "no {name} port drawn ({rgb:?})"
            );
        }
    });
}

/// Opens `GET /events` and returns the stream after the response head (its status line).
fn open_events(port: u16) -> (String, std::net::TcpStream) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    write!(s, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).expect("read head"), 1, "connection closed in the head");
        head.push(b[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), s)
}

/// Reads the stream until `needle` shows up.
fn read_until(s: &mut std::net::TcpStream, needle: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(needle) {
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("waiting for {needle:?}: {e}; got {:?}", String::from_utf8_lossy(&got)));
        assert!(n > 0, "stream closed before {needle:?}");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn event_clients_are_bounded_and_stalled_ones_block_no_generation() {
    let dir = test_dir("dashboard-sse");
    let prom = free_port();
    let d = daemon(&dir, prom);
    run_with_deadline(180, async move {
        let mut c = d.ready().await;
        let links = switch_links(&topology(&mut c).await);
        // One reading client, the other slots taken by clients that never read.
        let (head, mut reader) = open_events(prom);
        assert!(
            head.starts_with("HTTP/1.1 200") && head.contains("text/event-stream"),
            "{head}"
        );
        let mut stalled = Vec::new();
        for _ in 1..16 {
            let (head, s) = open_events(prom);
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            stalled.push(s);
        }
        let (head, _) = open_events(prom);
        assert!(head.starts_with("HTTP/1.1 503"), "a 17th client is refused: {head}");

        // Many changes while 15 clients read nothing: every generation still commits.
        let mut last = 0;
        for round in 0..6 {
            for &(sw, port) in links.iter().take(4) {
                let up = round % 2 == 1;
                last = c
                    .inject_fault(link_req(sw, port, up, false, true))
                    .await
                    .expect("inject")
                    .into_inner()
                    .generation;
            }
        }
        let text = read_until(&mut reader, &format!("generation {last} installed"));
        assert!(text.contains("event: notice\ndata: {"), "{text}");
        // The JSON documents answer meanwhile.
        let st = http_get(prom, "/api/status");
        assert!(st.contains(&format!("\"generation\":{last}")), "{st}");

        // A slot frees when a client leaves.
        drop(stalled.pop());
        let t = std::time::Instant::now();
        loop {
            let (head, _s) = open_events(prom);
            if head.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the slot was never freed: {head}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for path in [
            "/",
            "/dashboard/app.js",
            "/dashboard/app.css",
            "/api/fabric",
            "/api/excluded",
            "/api/jobs",
            "/api/timeline",
            "/api/loads",
        ] {
            let r = http_get(prom, path);
            assert!(r.starts_with("HTTP/1.1 200"), "{path}: {r:.300}");
        }
        assert!(http_get(prom, "/").contains("content-security-policy"));
    });
}
