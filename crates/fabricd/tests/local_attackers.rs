//! Local attackers and resource limits, against the real `fabricd` binary (issue #12, defects
//! 4, 5, 6, 10): a socket path that names a file, state directories another user prepared or
//! booby-trapped, idle connections by the thousand, oversized requests and error texts,
//! control characters in client-given names, a world-connectable socket mode, the
//! `:authority` grpcio sends over a Unix socket, and state-directory errors said once.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{chown, symlink, FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use tonic::Code;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

/// Starts fabricd with `opts` and explicit `--state-dir` / `--socket`; returns the child and
/// its log path.
fn spawn_at(dir: &Path, opts: &Opts, state: &Path, socket: &Path) -> (std::process::Child, std::path::PathBuf) {
    let config = dir.join("fabricd.toml");
    std::fs::write(&config, opts.config_text()).unwrap();
    let log = dir.join("fabricd.log");
    let logf = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(state)
        .arg("--socket")
        .arg(socket)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf)
        .spawn()
        .unwrap();
    (child, log)
}

/// Waits until the child exits (its code) or `serving()` holds (`None`), at most 60 s.
fn exit_or(child: &mut std::process::Child, serving: impl Fn() -> bool) -> Option<i32> {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st.code().unwrap_or(-1));
        }
        if serving() {
            return None;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "fabricd neither exited nor served"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn private_dir(p: &Path) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o750)).unwrap();
}

/// Defect 4: `--socket STATE/guid2lid` deleted the LID file. Only a stale socket is removed.
#[test]
fn a_socket_path_naming_a_regular_file_is_refused_and_the_file_kept() {
    let dir = test_dir("sock-file");
    let state = dir.join("state");
    private_dir(&state);
    let lids = state.join("guid2lid");
    std::fs::write(&lids, "0x0000000000000101 0x0001 0x0001\n").unwrap();
    let (mut child, log) = spawn_at(&dir, &Opts::new(SMALL), &state, &lids);
    let log = &log;
    let code = exit_or(&mut child, || {
        std::fs::symlink_metadata(&lids).is_ok_and(|m| m.file_type().is_socket())
            || std::fs::read_to_string(log).is_ok_and(|l| l.contains("gRPC listening"))
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(log).unwrap();
    let meta = std::fs::symlink_metadata(&lids).expect("the LID file is still there");
    assert!(meta.is_file(), "the LID file was replaced by a socket; log:\n{text}");
    assert_eq!(
        std::fs::read_to_string(&lids).unwrap(),
        "0x0000000000000101 0x0001 0x0001\n"
    );
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}; log:\n{text}");
    assert!(text.contains("is a regular file: refusing to remove it"), "{text}");
}

/// Defect 5: a state directory another user prepared (with a planted virtual fault) is
/// refused, with one message naming the path, the owner and the mode.
#[test]
fn a_state_directory_another_user_owns_is_refused_with_one_message() {
    let dir = test_dir("state-owner");
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A whole switch taken out of routing by someone else.
    std::fs::write(
        state.join("virtual-faults.json"),
        r#"{"version":1,"faults":[{"kind":"node","port_guid":"0x0000000000000101"}]}"#,
    )
    .unwrap();
    chown(&state, Some(65534), Some(65534)).unwrap();
    chown(state.join("virtual-faults.json"), Some(65534), Some(65534)).unwrap();
    let socket = dir.join("s.sock");
    let (mut child, log) = spawn_at(&dir, &Opts::new(SMALL), &state, &socket);
    let code = exit_or(&mut child, || socket.exists());
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}; log:\n{text}");
    let path = state.display().to_string();
    assert!(
        text.contains(&format!("{path}: owned by another user (owner uid 65534, mode 0755")),
        "{text}"
    );
    assert_eq!(text.matches(&path).count(), 1, "the path once:\n{text}");
}

/// Defect 10: a state directory that cannot be created is reported with its path and the OS
/// error once (it was up to three times).
#[test]
fn a_state_directory_error_names_the_path_and_the_os_error_once() {
    let dir = test_dir("state-once");
    let file = dir.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let state = file.join("state");
    let socket = dir.join("s.sock");
    let (mut child, log) = spawn_at(&dir, &Opts::new(SMALL), &state, &socket);
    let code = exit_or(&mut child, || socket.exists());
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}; log:\n{text}");
    assert_eq!(text.matches(&state.display().to_string()).count(), 1, "{text}");
    assert_eq!(text.matches("os error 20").count(), 1, "{text}");
}

/// Defect 5: a symlink planted at the temporary path of a state file (as `.jobs.json.tmp`
/// pointed at a root-owned file) is not followed when the daemon writes the file.
#[test]
fn a_symlink_planted_in_the_state_directory_is_not_followed() {
    let dir = test_dir("tmp-symlink");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let state = dir.join("state");
    private_dir(&state);
    symlink(&victim, state.join(".jobs.json.tmp")).unwrap();
    let d = Daemon::spawn_with_config(&dir, &write_config(&dir, &Opts::new(SMALL)), &[]);
    run_with_deadline(90, async {
        let mut c = d.ready().await;
        let t = topology(&mut c).await;
        c.set_job_mapping(pb::SetJobMappingRequest {
            job_id: "j1".into(),
            end_ports: vec![t.end_ports[0].name.clone()],
        })
        .await
        .expect("set job mapping");
    });
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let jobs = std::fs::read_to_string(state.join("jobs.json")).unwrap();
    assert!(jobs.contains("\"j1\""), "{jobs}");
}

fn write_config(dir: &Path, opts: &Opts) -> std::path::PathBuf {
    let p = dir.join("fabricd.toml");
    std::fs::write(&p, opts.config_text()).unwrap();
    p
}

/// Defect 6: idle connections beyond `max_connections` are refused (logged), idle ones are
/// closed after `idle_timeout_s`, live clients (answering pings) keep theirs and status keeps
/// answering; an oversized request gets a clear error naming the limit; the error of a huge
/// job mapping is bounded.
#[test]
fn connections_and_requests_are_bounded_and_status_keeps_answering() {
    let dir = test_dir("limits");
    let mut opts = Opts::new(SMALL);
    opts.extra = "[grpc]\nmax_connections = 8\nidle_timeout_s = 2\nmax_request_bytes = 1048576\n".into();
    let d = Daemon::spawn(&dir, &opts, &[]);
    run_with_deadline(120, async {
        let mut c = d.ready().await;
        let t = topology(&mut c).await;
        let (mut sub, _) = subscribe(&mut c, "quiet-subscriber", &t.end_ports[0].name).await;
        // 40 connections that never send a byte.
        let mut idle: Vec<std::os::unix::net::UnixStream> = (0..40)
            .map(|_| std::os::unix::net::UnixStream::connect(&d.socket).expect("connect"))
            .collect();
        let opened = Instant::now();
        // Every one of them is closed by the daemon: at once beyond the limit, after the idle
        // timeout within it.
        for s in &mut idle {
            s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            let mut b = [0u8; 64];
            loop {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    // Within the limit the server writes its HTTP/2 settings first.
                    Ok(_) => {}
                }
                assert!(
                    opened.elapsed() < Duration::from_secs(14),
                    "an idle connection stayed open"
                );
            }
        }
        assert!(
            opened.elapsed() < Duration::from_secs(14),
            "an idle connection stayed open"
        );
        // The client that answers pings kept its connection, and status answers on it and on a
        // fresh one.
        let s = status(&mut c).await;
        assert!(s.generation >= 1);
        let mut fresh = fabric_proto::connect(d.socket.to_str().unwrap())
            .await
            .expect("fresh connection");
        status(&mut fresh).await;
        // The quiet subscriber's stream is still open (3 idle timeouts later).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let r = tokio::time::timeout(Duration::from_millis(300), sub.message()).await;
        assert!(r.is_err(), "the subscriber's stream ended: {r:?}");
        status(&mut c).await;

        // A request over max_request_bytes (2 MB): a clear error naming the limit.
        let big = pb::SetJobMappingRequest {
            job_id: "big".into(),
            end_ports: vec!["x".repeat(1000); 2000],
        };
        let e = c.set_job_mapping(big).await.unwrap_err();
        assert!(
            matches!(e.code(), Code::OutOfRange | Code::ResourceExhausted),
            "{:?}: {}",
            e.code(),
            e.message()
        );
        assert!(e.message().contains("1048576"), "{}", e.message());
        // 60 000 unknown end ports (under the limit): the error is bounded.
        let many = pb::SetJobMappingRequest {
            job_id: "many".into(),
            end_ports: (0..60_000).map(|i| format!("ghost{i}")).collect(),
        };
        let e = c.set_job_mapping(many).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().len() < 8192, "{} bytes of error", e.message().len());
        assert!(
            e.message().contains("ghost0") && e.message().contains("more)"),
            "{}",
            e.message()
        );
        status(&mut c).await;
    });
    let log = d.log_text();
    assert!(log.contains("gRPC connections refused"), "{log}");
}

/// Defect 10: a subscriber name with a newline does not forge a log line, and a socket mode
/// every local user may connect to is warned about.
#[test]
fn client_names_cannot_forge_log_lines_and_a_world_socket_mode_is_warned_about() {
    let dir = test_dir("names");
    let mut opts = Opts::new(SMALL);
    opts.extra = "[grpc]\nsocket_mode = \"0777\"\n".into();
    let d = Daemon::spawn(&dir, &opts, &[]);
    run_with_deadline(90, async {
        let mut c = d.ready().await;
        let t = topology(&mut c).await;
        let name = "evil\n  WARN fabricd::event_loop: forged line\r\u{1b}[2J";
        let (_sub, _) = subscribe(&mut c, name, &t.end_ports[0].name).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    let log = d.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("forged line")).collect();
    // "subscriber registered" and "subscriber gone": the name stays inside its line.
    assert!(!lines.is_empty(), "{log}");
    for l in &lines {
        assert!(l.contains(" name=evil\\n  WARN"), "a forged line: {l:?}\n{log}");
    }
    assert!(lines[0].contains("subscriber registered"), "{log}");
    assert!(!log.contains('\u{1b}'), "an escape sequence reached the log");
    assert!(
        log.contains("grpc.socket_mode 0777 lets every local user connect"),
        "{log}"
    );
}

/// One HTTP/2 request by hand (a gRPC health check) with the given `:authority`, the way
/// grpcio (gRPC C-core ≥ 1.57) sends it over a Unix socket: the %-encoded socket path. HPACK
/// literals without Huffman coding. Returns the frames received on stream 1 within 5 s.
fn raw_health_check(socket: &Path, authority: &str) -> Vec<(u8, Vec<u8>)> {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let frame = |ty: u8, flags: u8, stream: u32, payload: &[u8]| {
        let mut f = Vec::new();
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        f.push(ty);
        f.push(flags);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let literal = |block: &mut Vec<u8>, name: &str, value: &str| {
        // Literal header field without indexing, new name (RFC 7541 §6.2.2).
        block.push(0x00);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    };
    let mut block = Vec::new();
    literal(&mut block, ":method", "POST");
    literal(&mut block, ":scheme", "http");
    literal(&mut block, ":path", "/grpc.health.v1.Health/Check");
    literal(&mut block, ":authority", authority);
    literal(&mut block, "content-type", "application/grpc");
    literal(&mut block, "te", "trailers");
    literal(
        &mut block,
        "user-agent",
        "grpc-python/1.66.1 grpc-c/43.0.0 (linux; chttp2)",
    );
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    out.extend(frame(0x1, 0x4, 1, &block));
    // An empty HealthCheckRequest: uncompressed, length 0.
    out.extend(frame(0x0, 0x1, 1, &[0, 0, 0, 0, 0]));
    s.write_all(&out).unwrap();
    let mut buf = Vec::new();
    let t = Instant::now();
    let mut chunk = [0u8; 4096];
    let mut frames = Vec::new();
    while t.elapsed() < Duration::from_secs(5) {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
        // Parse complete frames; acknowledge settings.
        let mut at = 0;
        while buf.len() >= at + 9 {
            let len = u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]]) as usize;
            if buf.len() < at + 9 + len {
                break;
            }
            let (ty, flags) = (buf[at + 3], buf[at + 4]);
            let stream = u32::from_be_bytes([buf[at + 5], buf[at + 6], buf[at + 7], buf[at + 8]]) & 0x7fff_ffff;
            let payload = buf[at + 9..at + 9 + len].to_vec();
            if ty == 0x4 && flags & 1 == 0 {
                s.write_all(&frame(0x4, 1, 0, &[])).unwrap();
            }
            if stream == 1 {
                frames.push((ty, payload));
            }
            at += 9 + len;
        }
        buf.drain(..at);
        // Trailers (HEADERS with END_STREAM) or RST_STREAM end the call.
        if frames.iter().any(|(ty, _)| *ty == 0x3) || frames.iter().filter(|(ty, _)| *ty == 0x1).count() >= 2 {
            break;
        }
    }
    frames
}

/// Defect 10: grpcio clients over the Unix socket sent an `:authority` the HTTP/2 layer
/// rejected (PROTOCOL_ERROR) unless they set one: what common clients send is accepted.
#[test]
fn the_authority_grpc_clients_send_over_a_unix_socket_is_accepted() {
    let dir = test_dir("authority");
    let d = Daemon::spawn(&dir, &Opts::new(SMALL), &[]);
    run_with_deadline(90, async {
        d.ready().await;
    });
    let path = d.socket.display().to_string();
    // What grpcio 1.85.3 (grpc-c 58) was seen sending for `unix:/tmp/probe.sock`:
    // `tmp%2Fprobe.sock` (the path without its leading '/', %-encoded).
    let grpcio = path.trim_start_matches('/').replace('%', "%25").replace('/', "%2F");
    let encoded = path.replace('%', "%25").replace('/', "%2F");
    for authority in [grpcio.as_str(), &encoded, &path, "", "localhost"] {
        let frames = raw_health_check(&d.socket, authority);
        assert!(
            !frames.iter().any(|(ty, _)| *ty == 0x3),
            "authority {authority:?}: RST_STREAM {frames:?}"
        );
        // A DATA frame with the HealthCheckResponse: 5-byte prefix, then status = SERVING (1).
        assert!(
            frames.iter().any(|(ty, p)| *ty == 0x0 && p.ends_with(&[0x08, 0x01])),
            "authority {authority:?}: no SERVING answer: {frames:?}"
        );
    }
}
