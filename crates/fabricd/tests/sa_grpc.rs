//! Subnet Administration through the daemon (mock driver, real `fabricd` and `fabricctl`
//! binaries, gRPC over the Unix socket): `SaQuery` answers from the installed tables, the SA's
//! status is a field of the answer, the answers follow a committed fault, and a daemon that has
//! not routed yet refuses.
//!
//! Record images are read here from their IBA layouts (vol. 1 15.2.5), independently of the
//! daemon's decoders: NodeRecord = LID (0..2), NodeInfo (4..44: NodeType at 6, NodeGUID at
//! 16..24, PortGUID at 24..32); PathRecord = DLID (40..42), SLID (42..44), SL (low 4 bits of 53).

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use fabric_proto::Client;
use serde_json::Value;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

fn be64(b: &[u8], o: usize) -> u64 {
    u64::from_be_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `fabricctl --socket S sa ARGS --json`: the document and the raw records.
fn fabricctl_sa(d: &Daemon, args: &[&str]) -> (Value, Vec<Vec<u8>>) {
    let out = std::process::Command::new(fabricctl_binary())
        .arg("--socket")
        .arg(&d.socket)
        .arg("sa")
        .args(args)
        .arg("--json")
        .output()
        .expect("run fabricctl");
    assert!(
        out.status.success(),
        "fabricctl sa {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("fabricctl sa --json prints JSON");
    let raw = v["raw_records_hex"]
        .as_array()
        .expect("raw_records_hex")
        .iter()
        .map(|h| unhex(h.as_str().expect("hex string")))
        .collect();
    (v, raw)
}

fn query(method: pb::SaMethod, attribute: &str, mask: u64, template: Vec<u8>) -> pb::SaQueryRequest {
    pb::SaQueryRequest {
        method: method as i32,
        attribute: attribute.into(),
        component_mask: mask,
        template,
        ..Default::default()
    }
}

/// The SA answers (its snapshot follows the commit on a blocking thread, a moment later).
async fn until_sa_serves(d: &Daemon, c: &mut Client) {
    let t = Instant::now();
    loop {
        match c.sa_query(query(pb::SaMethod::GetTable, "smir", 0, vec![])).await {
            Ok(_) => return,
            Err(e) if e.code() == tonic::Code::FailedPrecondition => {}
            Err(e) => panic!("SaQuery: {e:?}"),
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the SA never served; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The PathRecords from `slid` to `dlid` (`fabricctl sa pr`), once the answer satisfies `ok`
/// (the SA snapshot of a new generation is stored a moment after the commit).
async fn paths_when(d: &Daemon, slid: u16, dlid: u16, what: &str, ok: impl Fn(&[Vec<u8>]) -> bool) -> Vec<Vec<u8>> {
    let t = Instant::now();
    loop {
        let (v, raw) = fabricctl_sa(d, &["pr", "--slid", &slid.to_string(), "--dlid", &dlid.to_string()]);
        assert_eq!(v["status"], 0, "{v}");
        if ok(&raw) {
            return raw;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never saw {what}: {v}; log:\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn trace(c: &mut Client, src: &str, dst: &str, escape: bool) -> pb::TraceResponse {
    c.trace(pb::TraceRequest {
        src: src.into(),
        dst: dst.into(),
        escape,
    })
    .await
    .expect("trace")
    .into_inner()
}

#[test]
fn sa_queries_answer_from_the_installed_tables_and_follow_a_fault() {
    run_with_deadline(180, async {
        let dir = test_dir("sa");
        let port = free_port();
        let mut opts = Opts::new(SMALL);
        opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");
        let d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        until_sa_serves(&d, &mut c).await;
        let t = topology(&mut c).await;

        // Every node: one NodeRecord per switch (port 0, its LID) and one per CA port.
        let (v, nr) = fabricctl_sa(&d, &["nr"]);
        assert_eq!(v["attribute"], "NodeRecord", "{v}");
        assert_eq!(nr.len(), t.switches.len() + t.end_ports.len(), "{v}");
        let switches: BTreeSet<(u64, u16)> = nr
            .iter()
            .filter(|r| r[6] == 2)
            .map(|r| (be64(r, 16), be16(r, 0)))
            .collect();
        let want: BTreeSet<(u64, u16)> = t.switches.iter().map(|s| (s.guid, s.lid as u16)).collect();
        assert_eq!(switches, want, "switch NodeRecords (GUID, LID)");
        let ca_ports: BTreeSet<(u64, u16)> = nr
            .iter()
            .filter(|r| r[6] == 1)
            .map(|r| (be64(r, 24), be16(r, 0)))
            .collect();
        let want: BTreeSet<(u64, u16)> = t.end_ports.iter().map(|e| (e.guid, e.base_lid as u16)).collect();
        assert_eq!(ca_ports, want, "CA port NodeRecords (PortGUID, LID)");
        // One by LID.
        let e0 = &t.end_ports[0];
        let (_, one) = fabricctl_sa(&d, &["nr", &e0.base_lid.to_string()]);
        assert_eq!(one.len(), 1);
        assert_eq!(be64(&one[0], 24), e0.guid);

        // A path between hosts on different leaves: a record exactly when the daemon's own
        // trace through the installed tables reaches, with the SL GetPath names.
        let leaf = |e: &pb::EndPortInfo| e.switch_guid;
        let a = &t.end_ports[0];
        let b = t
            .end_ports
            .iter()
            .find(|e| leaf(e) != leaf(a))
            .expect("a host on another leaf");
        let path = c
            .get_path(pb::GetPathRequest {
                dst: b.name.clone(),
                ..Default::default()
            })
            .await
            .expect("GetPath")
            .into_inner();
        assert!(trace(&mut c, &a.name, &b.name, false).await.reached);
        let pr = paths_when(&d, a.base_lid as u16, path.base_lid as u16, "a base path", |r| {
            !r.is_empty()
        })
        .await;
        assert_eq!(pr.len(), 1, "one path per (SLID, DLID)");
        assert_eq!(
            (be16(&pr[0], 42), be16(&pr[0], 40)),
            (a.base_lid as u16, path.base_lid as u16)
        );
        assert_eq!(u32::from(pr[0][53] & 0x0f), path.base_sl, "base LIDs on the base SL");
        assert_ne!(path.escape_lid, 0, "LMC 1 in the test configuration");
        assert!(trace(&mut c, &a.name, &b.name, true).await.reached);
        let esc = paths_when(&d, a.base_lid as u16, path.escape_lid as u16, "an escape path", |r| {
            !r.is_empty()
        })
        .await;
        assert_eq!(
            u32::from(esc[0][53] & 0x0f),
            path.escape_sl,
            "escape LIDs on the escape SL"
        );

        // The SA's own statuses are answers, not gRPC errors.
        let mut unknown = query(pb::SaMethod::Get, "", 0, vec![]);
        unknown.attribute_id = 0x1234;
        let r = c
            .sa_query(unknown)
            .await
            .expect("an unknown attribute is answered")
            .into_inner();
        assert_eq!((r.status, r.records.len()), (0x000c, 0), "{r:?}");
        let r = c
            .sa_query(query(pb::SaMethod::Get, "NodeRecord", 1 << 40, vec![]))
            .await
            .expect("a bad component mask is answered")
            .into_inner();
        assert_eq!((r.status, r.records.len()), (0x0200, 0), "ERR_REQ_INVALID: {r:?}");
        let e = c
            .sa_query(query(pb::SaMethod::Get, "NoSuchRecord", 0, vec![]))
            .await
            .expect_err("an unknown attribute name is a malformed request");
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("attribute \"NoSuchRecord\""), "{e:?}");

        // The destination's cable goes down (physical fault) and the generation routing around
        // it is committed: the SA's tables follow, no path is answered; back up, it is again.
        let version = |v: &Value| v["snapshot_version"].as_u64().expect("version");
        let (slid, dlid) = (a.base_lid.to_string(), path.base_lid.to_string());
        let a_to_b = ["pr", "--slid", &slid, "--dlid", &dlid];
        let (v0, _) = fabricctl_sa(&d, &a_to_b);
        let node = |up: bool| pb::InjectFaultRequest {
            kind: pb::FaultKind::Node as i32,
            up,
            node: b.name.clone(),
            physical: true,
            wait: true,
            ..Default::default()
        };
        c.inject_fault(node(false)).await.expect("node down");
        assert!(!trace(&mut c, &a.name, &b.name, false).await.reached);
        paths_when(
            &d,
            a.base_lid as u16,
            path.base_lid as u16,
            "no path to a host whose cable is down",
            <[Vec<u8>]>::is_empty,
        )
        .await;
        let (v1, _) = fabricctl_sa(&d, &a_to_b);
        assert!(version(&v1) > version(&v0), "a new snapshot: {v0} then {v1}");
        c.inject_fault(node(true)).await.expect("node up");
        assert!(trace(&mut c, &a.name, &b.name, false).await.reached);
        paths_when(&d, a.base_lid as u16, path.base_lid as u16, "the path back", |r| {
            r.len() == 1
        })
        .await;

        // Counted per attribute, method and status.
        let m = http_get(port, "/metrics");
        for needle in [
            "fabricd_sa_serving 1",
            "fabricd_sa_answers_total{attribute=\"NodeRecord\",method=\"get_table\",status=\"0x0000\"}",
            "fabricd_sa_answers_total{attribute=\"other\",method=\"get\",status=\"0x000c\"} 1",
            "fabricd_sa_malformed_total 0",
        ] {
            assert!(m.contains(needle), "missing {needle:?} in\n{m}");
        }
    });
}

#[test]
fn a_daemon_that_has_not_routed_refuses_sa_queries() {
    run_with_deadline(120, async {
        let dir = test_dir("sa-not-routed");
        let port = free_port();
        let mut opts = Opts::new(SMALL);
        opts.extra = format!("[prometheus]\nlisten = \"127.0.0.1:{port}\"\n");
        // No LFT block can be written: no generation is ever installed.
        let text = opts
            .config_text()
            .replace("[driver.mock]\n", "[driver.mock]\nerror_rate = 1.0\nmax_retries = 0\n");
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, text).expect("write config");
        let d = Daemon::spawn_with_config(&dir, &config, &[]);
        let mut c = d.client().await;
        wait_status(&d, &mut c, "a failed first generation", Duration::from_secs(30), |s| {
            !s.last_error.is_empty()
        })
        .await;
        let e = c
            .sa_query(query(pb::SaMethod::GetTable, "nr", 0, vec![]))
            .await
            .expect_err("no routing installed: the SA does not answer");
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("no routing generation is installed"), "{e:?}");
        assert_eq!(status(&mut c).await.generation, 0);
        assert!(http_get(port, "/metrics").contains("fabricd_sa_serving 0"));
    });
}

/// The PathRecords from `slid` to `dlid` (gRPC), as (SLID, DLID) pairs.
async fn sa_paths(c: &mut Client, slid: u16, dlid: u16) -> usize {
    let mut t = vec![0u8; 44];
    t[40..42].copy_from_slice(&dlid.to_be_bytes());
    t[42..44].copy_from_slice(&slid.to_be_bytes());
    let r = c
        .sa_query(query(pb::SaMethod::GetTable, "PathRecord", (1 << 4) | (1 << 5), t))
        .await
        .expect("PathRecord query")
        .into_inner();
    assert_eq!(r.status, 0, "{r:?}");
    r.records.len()
}

/// In the middle of a five-phase update (a subscriber has not acked Unpath: the tables stay as
/// they are), after a cable went down: the SA answers a path exactly where the simulated
/// switches deliver the packet, over base and escape LIDs.
#[test]
fn during_an_update_the_sa_answers_what_the_switches_deliver() {
    run_with_deadline(180, async {
        let dir = test_dir("sa-update");
        let opts = Opts::new(SMALL);
        let text = opts
            .config_text()
            .replace("[update]\n", "[update]\nunpath_deadline_ms = 60000\n");
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, text).expect("write config");
        let d = Daemon::spawn_with_config(&dir, &config, &[]);
        let mut c = d.ready().await;
        until_sa_serves(&d, &mut c).await;
        let t = topology(&mut c).await;
        let a = t.end_ports[0].clone();
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "sa-check", &a.name).await;
        // A cable between a leaf and a spine goes down.
        let (sw, port) = switch_links(&t)[0];
        c.inject_fault(link_req(sw, port, false, true, false))
            .await
            .expect("link down");
        let unpath = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("an Unpath notice")
            .expect("stream")
            .expect("open");
        assert_eq!(unpath.phase, pb::Phase::Unpath as i32, "{unpath:?}");

        // Waiting for the ack: the tables do not move. The SA's snapshot follows the cable a
        // moment after the change; then every answer is what the switches do.
        let started = Instant::now();
        loop {
            let mut differ = Vec::new();
            let mut unreachable = 0;
            for x in t.end_ports.iter().filter(|x| x.guid != a.guid) {
                for escape in [false, true] {
                    let reached = trace(&mut c, &a.name, &x.name, escape).await.reached;
                    let dlid = if escape { x.escape_lid } else { x.base_lid };
                    let answered = sa_paths(&mut c, a.base_lid as u16, dlid as u16).await;
                    unreachable += usize::from(!reached);
                    if answered != usize::from(reached) {
                        differ.push(format!(
                            "{} (escape {escape}): delivered {reached}, {answered} paths",
                            x.name
                        ));
                    }
                }
            }
            if differ.is_empty() {
                eprintln!("pairs not delivered in the middle of the update: {unreachable}");
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the SA answers what the switches do not deliver: {differ:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            status(&mut c).await.phase,
            pb::Phase::Unpath as i32,
            "still waiting for the ack"
        );
        ack_update(&mut sc, &mut stream, first.subscriber_id, unpath.generation).await;
    });
}
