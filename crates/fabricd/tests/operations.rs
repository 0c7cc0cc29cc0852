//! Acceptance: bad requests, configuration reload, crash and restart, systemd notifications,
//! signals.

mod common;

use std::collections::HashMap;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use common::*;
use fabric_proto::v1 as pb;
use tonic::Code;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

fn expect_err<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, needle: &str) {
    match r {
        Ok(v) => panic!("expected {code:?} containing {needle:?}, got {v:?}"),
        Err(s) => {
            assert_eq!(s.code(), code, "{}", s.message());
            assert!(
                s.message().contains(needle),
                "{:?} does not contain {needle:?}",
                s.message()
            );
        }
    }
}

#[test]
fn bad_requests_get_precise_errors_and_the_daemon_keeps_serving() {
    run_with_deadline(120, async {
        let dir = test_dir("bad");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut opts = Opts::new(SMALL);
        opts.extra = format!("[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\n");
        let d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        // The optional TCP listener serves the same API.
        let mut tcp = fabric_proto::connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("tcp connect");
        assert_eq!(status(&mut tcp).await.generation, 1);
        let t = topology(&mut c).await;
        let leaf = t.switches.iter().find(|s| s.level == Some(0)).expect("a leaf");
        let leaf_guid = format!("0x{:016x}", leaf.guid);

        expect_err(
            c.inject_fault(link_req(0x1234, 1, false, false, false)).await,
            Code::NotFound,
            "unknown switch GUID 0x0000000000001234",
        );
        let mut r = link_req(leaf.guid, 99, false, false, false);
        expect_err(
            c.inject_fault(r.clone()).await,
            Code::InvalidArgument,
            &format!("switch {leaf_guid} has no port 99 (ports 1..={})", leaf.nports),
        );
        r.port = 0;
        expect_err(c.inject_fault(r.clone()).await, Code::InvalidArgument, "has no port 0");
        r.port = 70000;
        expect_err(c.inject_fault(r).await, Code::InvalidArgument, "has no port 70000");
        let mut r = link_req(leaf.guid, 1, false, false, false);
        r.switch = "no-such-switch".into();
        expect_err(
            c.inject_fault(r).await,
            Code::NotFound,
            "unknown switch \"no-such-switch\"",
        );
        let mut r = link_req(leaf.guid, 1, false, false, false);
        r.kind = pb::FaultKind::Unspecified as i32;
        expect_err(c.inject_fault(r).await, Code::InvalidArgument, "fault kind is required");
        let r = pb::InjectFaultRequest {
            kind: pb::FaultKind::Node as i32,
            node: "0xdeadbeef".into(),
            ..Default::default()
        };
        expect_err(
            c.inject_fault(r).await,
            Code::NotFound,
            "unknown end port GUID 0x00000000deadbeef",
        );

        // Malformed job mappings.
        let job = |id: &str, ports: &[&str]| pb::SetJobMappingRequest {
            job_id: id.into(),
            end_ports: ports.iter().map(std::string::ToString::to_string).collect(),
        };
        let n0 = t.end_ports[0].name.clone();
        expect_err(
            c.set_job_mapping(job("", &[&n0])).await,
            Code::InvalidArgument,
            "job_id must not be empty",
        );
        expect_err(
            c.set_job_mapping(job("a b", &[&n0])).await,
            Code::InvalidArgument,
            "contains ' '",
        );
        expect_err(
            c.set_job_mapping(job("j", &[])).await,
            Code::InvalidArgument,
            "maps no end port",
        );
        expect_err(
            c.set_job_mapping(job("j", &[&n0, "ghost", &n0])).await,
            Code::InvalidArgument,
            "end_ports[1]: unknown end port \"ghost\"",
        );
        expect_err(
            c.set_job_mapping(job("j", &[&n0, &n0])).await,
            Code::InvalidArgument,
            "listed twice",
        );
        expect_err(
            c.clear_job(pb::ClearJobRequest { job_id: "nope".into() }).await,
            Code::NotFound,
            "no job \"nope\"",
        );
        expect_err(
            c.get_lft(pb::GetLftRequest {
                switch: "0x99".into(),
                format: 0,
            })
            .await,
            Code::NotFound,
            "unknown switch GUID 0x0000000000000099",
        );
        expect_err(
            c.trace(pb::TraceRequest {
                src: "ghost".into(),
                dst: n0.clone(),
                escape: false,
            })
            .await,
            Code::NotFound,
            "src: unknown end port \"ghost\"",
        );

        // OpenSM dump of one switch.
        let dump = c
            .get_lft(pb::GetLftRequest {
                switch: leaf.name.clone(),
                format: pb::LftFormat::Opensm as i32,
            })
            .await
            .expect("opensm dump")
            .into_inner()
            .opensm_dump;
        assert!(dump.starts_with("Unicast lids [0-"), "{dump}");
        assert!(dump.contains(&format!("guid {leaf_guid} ")), "{dump}");
        assert_eq!(dump.matches("Unicast lids").count(), 1);

        // StreamLft gives the same tables in bounded messages: one switch, all, raw.
        let client = c.clone();
        let stream = |switch: &str, format: pb::LftFormat| {
            let req = pb::GetLftRequest {
                switch: switch.to_string(),
                format: format as i32,
            };
            let mut c = client.clone();
            async move {
                let mut s = c.stream_lft(req).await.expect("StreamLft").into_inner();
                let mut all = Vec::new();
                while let Some(m) = s.message().await.expect("StreamLft message") {
                    assert_eq!(m.generation, 1);
                    assert!(m.opensm_dump.is_empty() || m.opensm_dump.ends_with('\n'));
                    all.push(m);
                }
                all
            }
        };
        let one = stream(&leaf.name, pb::LftFormat::Opensm).await;
        assert_eq!(one.iter().map(|m| m.opensm_dump.as_str()).collect::<String>(), dump);
        let whole = c
            .get_lft(pb::GetLftRequest {
                switch: String::new(),
                format: pb::LftFormat::Opensm as i32,
            })
            .await
            .expect("opensm dump")
            .into_inner()
            .opensm_dump;
        let streamed = stream("", pb::LftFormat::Opensm).await;
        assert_eq!(
            streamed.iter().map(|m| m.opensm_dump.as_str()).collect::<String>(),
            whole
        );
        let raw = c
            .get_lft(pb::GetLftRequest {
                switch: String::new(),
                format: pb::LftFormat::Raw as i32,
            })
            .await
            .expect("raw")
            .into_inner()
            .switches;
        let streamed = stream("", pb::LftFormat::Raw).await;
        assert!(streamed.iter().all(|m| m.switches.len() == 1));
        assert_eq!(streamed.into_iter().flat_map(|m| m.switches).collect::<Vec<_>>(), raw);
        expect_err(
            c.stream_lft(pb::GetLftRequest {
                switch: "0x99".into(),
                format: 0,
            })
            .await,
            Code::NotFound,
            "unknown switch GUID 0x0000000000000099",
        );

        // Still serving, nothing changed.
        let s = status(&mut c).await;
        assert_eq!(s.generation, 1);
        assert_eq!(s.virtual_faults, 0);
        assert!(c
            .list_jobs(pb::ListJobsRequest {})
            .await
            .expect("list")
            .into_inner()
            .jobs
            .is_empty());

        // Disable fault injection by a SIGHUP reload.
        let mut o = Opts::new(SMALL);
        o.fault_injection = false;
        std::fs::write(&d.config, o.config_text()).expect("rewrite config");
        d.signal(libc::SIGHUP);
        let mut refused = false;
        for _ in 0..200 {
            match c.inject_fault(link_req(leaf.guid, 1, false, false, false)).await {
                Err(s) if s.code() == Code::FailedPrecondition => {
                    assert!(s.message().contains("fault injection is disabled"), "{}", s.message());
                    refused = true;
                    break;
                }
                Ok(_) => {
                    // Reload not applied yet: undo and retry.
                    let _ = c.inject_fault(link_req(leaf.guid, 1, true, false, false)).await;
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(s) => panic!("unexpected {s:?}"),
            }
        }
        assert!(refused, "SIGHUP did not disable fault injection");
        // A reload with a bad file is refused and the daemon keeps its configuration.
        std::fs::write(&d.config, "[update]\ncoalesce_ms = \"soon\"\n").expect("rewrite config");
        d.signal(libc::SIGHUP);
        tokio::time::sleep(Duration::from_millis(300)).await;
        expect_err(
            c.inject_fault(link_req(leaf.guid, 1, false, false, false)).await,
            Code::FailedPrecondition,
            "disabled",
        );
        let log = d.log_text();
        assert!(log.contains("reload refused"), "{log}");
        assert!(log.contains("update.coalesce_ms"), "{log}");
        assert_eq!(status(&mut c).await.phase, pb::Phase::Idle as i32);
    });
}

async fn lids_of(c: &mut fabric_proto::Client) -> HashMap<u64, (u32, u32)> {
    let t = topology(c).await;
    let mut m: HashMap<u64, (u32, u32)> = t
        .end_ports
        .iter()
        .map(|e| (e.guid, (e.base_lid, e.escape_lid)))
        .collect();
    m.extend(t.switches.iter().map(|s| (s.guid, (s.lid, 0))));
    m
}

#[test]
fn kill_9_then_restart_keeps_lids_jobs_and_lfts() {
    run_with_deadline(150, async {
        let dir = test_dir("restart");
        let opts = Opts::new(SMALL);
        // First life: default LIDs are persisted.
        let mut d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        let first = lids_of(&mut c).await;
        drop(c);
        d.kill9();
        // An operator edits guid2lid (e.g. LIDs moved over from OpenSM): swap two end ports.
        let path = d.state.join("guid2lid");
        let text = std::fs::read_to_string(&path).expect("guid2lid persisted");
        let t0: Vec<&str> = text.lines().collect();
        assert_eq!(t0.len(), first.len(), "one record per end port and switch");
        let t = {
            let mut c2 = None;
            // Find the two first end-port records (pairs of LIDs: min != max).
            let pairs: Vec<usize> = t0
                .iter()
                .enumerate()
                .filter(|(_, l)| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f[1] != f[2]
                })
                .map(|(i, _)| i)
                .take(2)
                .collect();
            let (a, b) = (pairs[0], pairs[1]);
            let fa: Vec<&str> = t0[a].split_whitespace().collect();
            let fb: Vec<&str> = t0[b].split_whitespace().collect();
            let mut lines: Vec<String> = t0.iter().map(std::string::ToString::to_string).collect();
            lines[a] = format!("{} {} {}", fa[0], fb[1], fb[2]);
            lines[b] = format!("{} {} {}", fb[0], fa[1], fa[2]);
            c2.get_or_insert((fa[0].to_string(), fb[0].to_string()));
            std::fs::write(&path, lines.join("\n") + "\n").expect("edit guid2lid");
            c2.expect("two records")
        };
        let ga = u64::from_str_radix(t.0.trim_start_matches("0x"), 16).expect("guid");
        let gb = u64::from_str_radix(t.1.trim_start_matches("0x"), 16).expect("guid");

        // Second life: the edited LIDs are used; set jobs and a virtual fault.
        let mut d = Daemon::spawn_with_config(&dir, &d.config.clone(), &[]);
        let mut c = d.ready().await;
        let lids = lids_of(&mut c).await;
        assert_eq!(lids[&ga], first[&gb], "persisted LIDs are kept");
        assert_eq!(lids[&gb], first[&ga]);
        let topo = topology(&mut c).await;
        let names: Vec<String> = topo.end_ports.iter().map(|e| e.name.clone()).collect();
        c.set_job_mapping(pb::SetJobMappingRequest {
            job_id: "job-a".into(),
            end_ports: names[..5].to_vec(),
        })
        .await
        .expect("job-a");
        c.set_job_mapping(pb::SetJobMappingRequest {
            job_id: "job-b".into(),
            end_ports: vec![format!("0x{:016x}", topo.end_ports[9].guid)],
        })
        .await
        .expect("job-b");
        let (sw, port) = switch_links(&topo)[1];
        c.inject_fault(link_req(sw, port, false, false, true))
            .await
            .expect("virtual link-down");
        let jobs = c.list_jobs(pb::ListJobsRequest {}).await.expect("jobs").into_inner();
        let (_, lft) = lfts(&mut c).await;
        let gen = status(&mut c).await.generation;
        // Numbering continues across restarts: 1 in the first life, 2 and 3 in this one.
        assert_eq!(gen, 3);
        drop(c);
        d.kill9();

        // Third life after kill -9: same LIDs, jobs and LFTs.
        let d = Daemon::spawn_with_config(&dir, &d.config.clone(), &[]);
        let mut c = d.ready().await;
        assert_eq!(lids_of(&mut c).await, lids);
        assert_eq!(
            c.list_jobs(pb::ListJobsRequest {}).await.expect("jobs").into_inner(),
            jobs
        );
        assert_eq!(jobs.jobs.len(), 2);
        let s = status(&mut c).await;
        assert_eq!(s.virtual_faults, 1, "the virtual fault survives the crash");
        let m = c
            .get_metrics(pb::GetMetricsRequest {})
            .await
            .expect("metrics")
            .into_inner();
        assert!(m.valid && m.deadlock_free && m.unreachable_pairs == 0, "{m:?}");
        assert!(m.mu_sp >= 1 && m.xi >= 1 && m.nu > 0.0, "{m:?}");
        // The floor of the live (degraded) topology, and where this routing stands against it.
        let floor = m.mu_rp_floor.expect("mu_rp_floor");
        assert!(floor.median >= 1, "{m:?}");
        assert!((0.0..=1.0).contains(&floor.p_above_median), "{m:?}");
        assert!((0.0..=1.0).contains(&floor.measured_p_above_median), "{m:?}");
        let median = m.mu_rp.expect("mu_rp").median;
        assert!(
            median + 1.0 >= f64::from(floor.median),
            "median {median} far below the floor {floor:?}"
        );
        let ids: Vec<&str> = m.jobs.iter().map(|j| j.job_id.as_str()).collect();
        assert_eq!(ids, vec!["job-a", "job-b"]);
        assert_eq!(m.jobs[0].end_ports, 5);
        // A single-port job has no intra-job route: every port is dark.
        assert_eq!((m.jobs[1].effective_xi, m.jobs[1].dark_share), (0, 1.0));
        let (_, lft2) = lfts(&mut c).await;
        assert!(lft2 == lft, "same LFTs after convergence");
        assert_eq!(verify(&mut c).await.unreachable_count, 0);
        // No temporary files are left in the state directory.
        for e in std::fs::read_dir(&d.state).expect("state dir") {
            let n = e.expect("entry").file_name().into_string().expect("utf-8");
            assert!(!n.ends_with(".tmp"), "leftover {n}");
        }
    });
}

#[test]
fn systemd_ready_and_stopping_signals_and_clean_exit() {
    run_with_deadline(120, async {
        let dir = test_dir("notify");
        let sock_path = dir.join("notify.sock");
        let rx = UnixDatagram::bind(&sock_path).expect("bind notify socket");
        rx.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        // A free loopback port for the Prometheus endpoint.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut opts = Opts::new(SMALL);
        opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");
        let mut d = Daemon::spawn(&dir, &opts, &[("NOTIFY_SOCKET", sock_path.to_str().expect("utf-8"))]);
        let recv_until = |needle: &str| -> String {
            let mut buf = [0u8; 4096];
            loop {
                let n = rx
                    .recv(&mut buf)
                    .unwrap_or_else(|e| panic!("no {needle} notification: {e}"));
                let msg = String::from_utf8_lossy(&buf[..n]).to_string();
                if msg.lines().any(|l| l == needle) {
                    return msg;
                }
            }
        };
        let ready = recv_until("READY=1");
        assert!(ready.contains("STATUS=generation 1 installed"), "{ready}");
        assert!(ready.contains(&format!("MAINPID={}", d.pid())), "{ready}");
        let mut c = d.ready().await;
        assert_eq!(
            status(&mut c).await.generation,
            1,
            "READY=1 comes after the first routing is installed"
        );

        // The standard health service reports the API as serving.
        let ch = fabric_proto::channel(d.socket.to_str().expect("utf-8"))
            .await
            .expect("channel");
        let mut health = tonic_health::pb::health_client::HealthClient::new(ch);
        let h = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: pb::SERVICE_NAME.into(),
            })
            .await
            .expect("health check")
            .into_inner();
        assert_eq!(
            h.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );

        // Prometheus endpoint: readiness and metrics.
        let get = |path: &str| -> String {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect prometheus");
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
            let mut out = String::new();
            s.read_to_string(&mut out).expect("read");
            out
        };
        assert!(get("/ready").starts_with("HTTP/1.1 200"));
        let m = get("/metrics");
        assert!(m.contains("fabricd_generation 1"), "{m}");
        assert!(m.contains("fabricd_lft_blocks_written_total"), "{m}");
        assert!(m.contains("fabricd_phase{phase=\"idle\"} 1"), "{m}");

        // SIGUSR2 forces a reroute: a new generation with nothing to write.
        d.signal(libc::SIGUSR2);
        let mut gen = 1;
        for _ in 0..200 {
            gen = status(&mut c).await.generation;
            if gen >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(gen, 2, "SIGUSR2 did not reroute");
        assert_eq!(status(&mut c).await.last_reroute.expect("timings").blocks_written, 0);

        drop(c);
        d.signal(libc::SIGTERM);
        recv_until("STOPPING=1");
        assert_eq!(d.wait_exit(Duration::from_secs(30)), Some(0), "SIGTERM exits with 0");
        assert!(!d.socket.exists(), "the socket is removed on exit");
    });
}

#[test]
fn check_config_reports_every_error() {
    let dir = test_dir("checkcfg");
    let cfg = dir.join("bad.toml");
    std::fs::write(
        &cfg,
        "[log]\nlevel = \"info\"\nverbose = true\n\n[update]\ncoalesce_ms = -1\n\n[routing]\nengine = \"fttree\"\n",
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(&cfg)
        .arg("--check-config")
        .output()
        .expect("run fabricd");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3 configuration errors"), "{err}");
    assert!(
        err.contains("bad.toml:3: log.verbose: unknown field `verbose`"),
        "{err}"
    );
    assert!(err.contains("bad.toml:6: update.coalesce_ms"), "{err}");
    assert!(err.contains("bad.toml:9: routing.engine"), "{err}");
    let ok = dir.join("ok.toml");
    std::fs::write(&ok, Opts::new(SMALL).config_text()).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(&ok)
        .arg("--check-config")
        .output()
        .expect("run fabricd");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn install_script_stages_a_complete_installation() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = test_dir("install");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_fabricd"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let install = |prefix: &str| {
        std::process::Command::new("bash")
            .arg(root.join("deploy/install.sh"))
            .arg("--destdir")
            .arg(&*dir)
            .arg("--bin-dir")
            .arg(&bin)
            .arg("--prefix")
            .arg(prefix)
            .output()
            .expect("run install.sh")
    };
    let out = install("/opt/fabricd");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "opt/fabricd/bin/fabricd",
        "etc/fabricd/fabricd.toml",
        "etc/systemd/system/fabricd.service",
        "var/lib/fabricd",
        "opt/fabricd/share/doc/fabricd/operations.md",
        "opt/fabricd/share/doc/fabricd/prometheus.yml",
    ] {
        assert!(dir.join(f).exists(), "missing {f}");
    }
    let unit = std::fs::read_to_string(dir.join("etc/systemd/system/fabricd.service")).expect("unit");
    assert!(
        unit.contains("ExecStart=/opt/fabricd/bin/fabricd --config /etc/fabricd/fabricd.toml"),
        "{unit}"
    );
    assert!(unit.contains("Type=notify"));
    // A second run keeps the operator's config and stages the new one next to it.
    std::fs::write(dir.join("etc/fabricd/fabricd.toml"), "[log]\nlevel = \"debug\"\n").expect("edit config");
    let out = install("/opt/fabricd");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kept = std::fs::read_to_string(dir.join("etc/fabricd/fabricd.toml")).expect("config");
    assert!(kept.contains("debug"));
    assert!(dir.join("etc/fabricd/fabricd.toml.new").exists());
}

fn what_if(kind: pb::FaultKind, switch: &str, port: u32, node: &str) -> pb::WhatIfChange {
    pb::WhatIfChange {
        kind: kind as i32,
        switch: switch.into(),
        port,
        node: node.into(),
    }
}

/// Maintenance planning: `WhatIf` predicts exactly what taking a spine down will do (the LFT
/// blocks the daemon then rewrites, the congestion it then reports), changes nothing itself,
/// reports a split fabric and lost end ports, refuses bad requests, and works with fault
/// injection disabled.
#[test]
fn what_if_predicts_a_maintenance_and_changes_nothing() {
    run_with_deadline(180, async {
        let dir = test_dir("whatif");
        let d = Daemon::spawn(&dir, &Opts::new(SMALL), &[]);
        let mut c = d.ready().await;
        let t = topology(&mut c).await;
        let spine = t.switches.iter().find(|s| s.level == Some(1)).expect("a spine");
        let spine_name = format!("0x{:016x}", spine.guid);
        let (_, before) = lfts(&mut c).await;
        let plan = c
            .what_if(pb::WhatIfRequest {
                down: vec![what_if(pb::FaultKind::Switch, &spine_name, 0, "")],
            })
            .await
            .expect("what-if")
            .into_inner();
        assert_eq!(plan.generation, 1);
        assert_eq!(plan.events, vec![format!("switch-down {spine_name}")]);
        assert_eq!((plan.components, plan.disconnected_pairs), (1, 0), "{plan:?}");
        assert_eq!((plan.end_ports_before, plan.end_ports_after), (24, 24));
        assert!(
            plan.valid && plan.deadlock_free && plan.unreachable_pairs == 0,
            "{plan:?}"
        );
        assert!(plan.lft_blocks > 0 && plan.switches_rewritten > 0, "{plan:?}");
        // Nothing changed.
        let (g, same) = lfts(&mut c).await;
        assert_eq!(g, 1);
        assert!(same == before, "a plan must not touch the tables");
        assert_eq!(status(&mut c).await.generation, 1);

        // Doing it for real rewrites exactly the predicted blocks and gives the predicted metrics.
        c.inject_fault(pb::InjectFaultRequest {
            kind: pb::FaultKind::Switch as i32,
            up: false,
            switch: spine_name.clone(),
            port: 0,
            node: String::new(),
            physical: false,
            wait: true,
        })
        .await
        .expect("switch down");
        let (g, after) = lfts(&mut c).await;
        assert_eq!(g, 2);
        assert_eq!(changed_blocks(&before, &after) as u64, plan.lft_blocks);
        let m = c
            .get_metrics(pb::GetMetricsRequest {})
            .await
            .expect("metrics")
            .into_inner();
        let predicted = plan.after.expect("after");
        assert_eq!(m.mu_sp, predicted.mu_sp);
        assert_eq!(m.mu_a2a, predicted.mu_a2a);
        assert_eq!(m.mu_rp.expect("rp").median, predicted.mu_rp.expect("rp").median);

        // Every up-link of one leaf: the fabric splits (4 end ports against the other 20).
        let leaf = t.switches.iter().find(|s| s.level == Some(0)).expect("a leaf");
        let leaf_name = format!("0x{:016x}", leaf.guid);
        let ups: Vec<_> = leaf
            .ports
            .iter()
            .filter(|p| p.remote_kind == pb::RemoteKind::Switch as i32)
            .map(|p| what_if(pb::FaultKind::Link, &leaf_name, p.port, ""))
            .collect();
        assert_eq!(ups.len(), 3);
        let node = t.end_ports.iter().find(|e| e.switch_guid != leaf.guid).expect("a node");
        let mut down = ups.clone();
        down.push(what_if(pb::FaultKind::Node, "", 0, &format!("0x{:016x}", node.guid)));
        let split = c
            .what_if(pb::WhatIfRequest { down })
            .await
            .expect("split plan")
            .into_inner();
        assert_eq!(split.generation, 2);
        assert_eq!((split.end_ports_before, split.end_ports_after), (24, 23));
        assert_eq!(split.components, 2, "{split:?}");
        assert_eq!(split.disconnected_pairs, 2 * 4 * 19, "{split:?}");
        assert!(split.valid && split.deadlock_free, "{split:?}");

        // Bad requests name what is wrong.
        expect_err(
            c.what_if(pb::WhatIfRequest {
                down: vec![what_if(pb::FaultKind::Switch, "nosuch", 0, "")],
            })
            .await,
            Code::NotFound,
            "nosuch",
        );
        expect_err(
            c.what_if(pb::WhatIfRequest {
                down: vec![what_if(pb::FaultKind::Link, &leaf_name, 99, "")],
            })
            .await,
            Code::InvalidArgument,
            "port 99",
        );
        expect_err(
            c.what_if(pb::WhatIfRequest { down: vec![] }).await,
            Code::InvalidArgument,
            "1 to 4096",
        );
        assert_eq!(status(&mut c).await.generation, 2);
        drop(c);
        drop(d);

        // Planning is read-only: allowed when fault injection is disabled.
        let mut opts = Opts::new(SMALL);
        opts.fault_injection = false;
        let dir2 = test_dir("whatif-noinject");
        let d = Daemon::spawn(&dir2, &opts, &[]);
        let mut c = d.ready().await;
        let plan = c
            .what_if(pb::WhatIfRequest {
                down: vec![what_if(pb::FaultKind::Switch, &spine_name, 0, "")],
            })
            .await
            .expect("what-if without fault injection")
            .into_inner();
        assert!(plan.valid && plan.lft_blocks > 0, "{plan:?}");
    });
}
