//! The subnet-manager side of the umad driver under ibsim, read back with infiniband-diags:
//!
//! * SL-to-VL: after the first generation's LFTs, in the background, the driver programs
//!   SLtoVLMappingTable (SL 1, the escape LIDs' service level, on the escape VL; every other SL
//!   on VL 0) on every switch (each linked input port, and port 0 when the switch has an
//!   enhanced port 0, to each other linked output port; ibsim's switches do not advertise
//!   OptimizedSLtoVLMappingProgramming, and those of the generated net files declare
//!   `enhanced port 0`) and on the CA ports; Status says `escape_vl_ready` when it is done. ibsim implements SLtoVLMappingTable Get and Set, so `smpquery sl2vl` reads the
//!   tables back. ibsim's default table maps SL n to VL n, so the whole row is checked (SL 2..15
//!   on VL 0 proves the driver wrote it).
//! * SMInfo: the manager answers SubnGet(SMInfo) on its own port (the simulator, like an HCA,
//!   forwards it): `sminfo` shows fabricd's port GUID, the configured `sm_priority` and state
//!   MASTER once the subnet is up, and the activity count grows; its port's CapabilityMask
//!   has IsSM.
//!
//! * The five-phase update waits for the escape VL: a fault injected right after the first
//!   generation (while the SL-to-VL tables may still be being written) reaches the subscriber's
//!   `UNPATH` only once Status says `escape_vl_ready` and the tables read back.
//!
//! * An escape VL that cannot be programmed (ibsim drops every SLtoVLMappingTable SMP entering a
//!   leaf: console `Error "<leaf>" 100 23`) never lets traffic move to the escape LIDs: the
//!   update is a direct upload (no `UNPATH`) and Status names the leaf; once the SMPs go through
//!   again the next update retries the tables and is a five-phase one.
//!
//! Needs `ibsim` (ibsim-utils) and infiniband-diags.

mod common;
mod umad_sim;

use std::time::Duration;

use common::{ack_update, link_req, run_with_deadline, status, subscribe, switch_links, test_dir, topology};
use fabric_ibsim_harness::Ibsim;
use fabric_proto::v1 as pb;
use umad_sim::{config, next_generation};

const SPEC: &str = "PGFT(2;4,4;1,2;1,1)";

/// `smpquery sl2vl <lid> [out port]` rows as (in port, out port, VL of SL 0..15).
fn sl2vl(sim: &Ibsim, lid: u32, out: Option<u32>) -> Vec<(u32, u32, Vec<u8>)> {
    let mut args = vec!["sl2vl".to_string(), lid.to_string()];
    if let Some(o) = out {
        args.push(o.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, text) = sim.tool("smpquery", &args);
    assert!(ok, "smpquery {args:?} failed:\n{text}");
    // "ports: in  3, out 20: | 0| 1| 0| ..."
    let mut rows = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("ports: in") else {
            continue;
        };
        let Some((inp, rest)) = rest.split_once(", out") else {
            continue;
        };
        let Some((outp, rest)) = rest.split_once(':') else {
            continue;
        };
        let vls: Vec<u8> = rest
            .split('|')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| v.parse().expect("VL"))
            .collect();
        rows.push((inp.trim().parse().expect("in"), outp.trim().parse().expect("out"), vls));
    }
    assert!(!rows.is_empty(), "no table in:\n{text}");
    rows
}

#[test]
fn sl2vl_tables_and_sminfo_read_back_with_infiniband_diags() {
    let dir = test_dir("umad-sm");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    let cfg = config("").replace("window = 16", "window = 16\nsm_priority = 9");
    std::fs::write(dir.join("fabricd.toml"), cfg).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(45, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        // The tables are written after the first generation, in the background.
        let t0 = std::time::Instant::now();
        let st = loop {
            let st = status(&mut c).await;
            if st.escape_vl_ready {
                break st;
            }
            assert!(st.escape_vl_error.is_empty(), "{}", st.escape_vl_error);
            assert!(t0.elapsed() < Duration::from_secs(15), "escape VL not ready: {st:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(st.escape_vl_pending, 0);
        assert!(st.escape_vl_ready_at_unix_ms > 0);
        // fabricd's own SMP counter.
        assert!(st.driver_smps_sent > 0, "{st:?}");
        let topo = topology(&mut c).await;
        let escape_vl = fabric_umad::ESCAPE_VL;
        let mut want = vec![0u8; 16];
        want[usize::from(fabric_umad::ESCAPE_SL)] = escape_vl;

        // A CA: one table.
        let ca = &topo.end_ports[1];
        let rows = sl2vl(&sim, ca.base_lid, None);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].2, want, "CA 0x{:016x} SL-to-VL", ca.guid);

        // A leaf and a spine: every cabled input port to a cabled output port, and input port 0
        // when the switch has an enhanced port 0 (a base port 0 carries management traffic only
        // and gets no Set: unit-tested in fabric-umad).
        for level in [0u32, 1] {
            let sw = topo.switches.iter().find(|s| s.level == Some(level)).expect("switch");
            let cabled: Vec<u32> = sw
                .ports
                .iter()
                .filter(|p| p.remote_kind != pb::RemoteKind::None as i32 && p.state == pb::PortState::Up as i32)
                .map(|p| p.port)
                .collect();
            let (ok, si) = sim.tool("smpquery", &["switchinfo", &sw.lid.to_string()]);
            assert!(ok, "smpquery switchinfo failed:\n{si}");
            let enhanced = si
                .lines()
                .find_map(|l| l.strip_prefix("EnhancedPort0:"))
                .map(|v| v.trim_start_matches('.').trim() == "1")
                .unwrap_or_else(|| panic!("no EnhancedPort0 in\n{si}"));
            assert!(enhanced, "the generated net file declares enhanced port 0");
            let out = cabled[0];
            let rows = sl2vl(&sim, sw.lid, Some(out));
            let mut checked = 0;
            for (inp, o, vls) in rows {
                assert_eq!(o, out);
                if inp != out && (cabled.contains(&inp) || (enhanced && inp == 0)) {
                    assert_eq!(vls, want, "switch 0x{:016x} in {inp} out {out}", sw.guid);
                    checked += 1;
                }
            }
            assert_eq!(checked, cabled.len(), "rows of switch 0x{:016x}", sw.guid);
        }

        // SMInfo of the manager, as `sminfo` (LID-routed to the SM LID of the local port) sees it.
        let me = &topo.end_ports[0];
        let query = || {
            let (ok, text) = sim.tool("sminfo", &[]);
            assert!(ok, "sminfo failed:\n{text}");
            text
        };
        let text = query();
        assert!(text.contains(&format!("sm lid {}", me.base_lid)), "{text}");
        assert!(text.contains(&format!("sm guid 0x{:x}", me.guid)), "{text}");
        assert!(text.contains("priority 9"), "{text}");
        assert!(text.contains("state 3 SMINFO_MASTER"), "{text}");
        let count = |t: &str| -> u64 {
            t.split("activity count ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no activity count in {t}"))
        };
        let first = count(&text);
        // The manager's port advertises IsSM (PortInfo.CapabilityMask).
        let (ok, pi) = sim.tool(
            "smpquery",
            &["portinfo", &me.base_lid.to_string(), &me.port_num.to_string()],
        );
        assert!(ok, "smpquery portinfo failed:\n{pi}");
        let cap = pi
            .lines()
            .find(|l| l.starts_with("CapMask:"))
            .unwrap_or_else(|| panic!("no CapMask in\n{pi}"));
        let mask = cap
            .rsplit("0x")
            .next()
            .and_then(|h| u32::from_str_radix(h.trim(), 16).ok())
            .unwrap_or_else(|| panic!("bad {cap}"));
        assert_ne!(mask & 0x2, 0, "IsSM (bit 1) not set: {cap}");
        // The light sweep keeps sending SMPs: the heartbeat moves.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let later = count(&query());
        assert!(later > first, "activity count did not grow ({first} -> {later})");
    });
}

#[test]
fn the_first_five_phase_update_waits_for_the_escape_vl() {
    let dir = test_dir("umad-escape-vl");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let host = format!("H-{:016x}", f.end_port(fabric_topology::EndPortId(0)).node_guid);
    let sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    std::fs::write(
        dir.join("fabricd.toml"),
        config("[fault_injection]\nenabled = true\nallow_physical = true\n"),
    )
    .expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(60, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        let topo = topology(&mut c).await;
        let ep = &topo.end_ports[3];
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "escape-vl", &ep.name).await;
        let id = first.subscriber_id;
        // At once: the background SL-to-VL pass may still be running.
        let (sw, port) = switch_links(&topo)[0];
        let mut ic = d.client().await;
        let inject = tokio::spawn(async move { ic.inject_fault(link_req(sw, port, false, false, true)).await });
        let n = tokio::time::timeout(Duration::from_secs(20), stream.message())
            .await
            .expect("a notice")
            .expect("stream")
            .expect("open");
        assert_eq!((n.generation, n.phase), (2, pb::Phase::Unpath as i32));
        let st = status(&mut c).await;
        assert!(st.escape_vl_ready, "UNPATH before the escape VL is ready: {st:?}");
        assert_eq!(st.escape_vl_pending, 0);
        // The escape SL is on the escape VL on the switches the escape traffic crosses.
        let leaf = topo.switches.iter().find(|s| s.level == Some(0)).expect("leaf");
        let out = leaf
            .ports
            .iter()
            .find(|p| p.remote_kind == pb::RemoteKind::Switch as i32 && p.state == pb::PortState::Up as i32)
            .expect("uplink")
            .port;
        let rows = sl2vl(&sim, leaf.lid, Some(out));
        let row = rows.iter().find(|r| r.0 != out && r.0 != 0).expect("an input port");
        assert_eq!(row.2[usize::from(fabric_umad::ESCAPE_SL)], fabric_umad::ESCAPE_VL);
        ack_update(&mut sc, &mut stream, id, 2).await;
        let r = inject.await.expect("join").expect("inject").into_inner();
        assert_eq!(r.generation, 2);
        assert!(status(&mut c).await.missed_acks.is_empty());
    });
}

#[test]
fn an_escape_vl_that_cannot_be_programmed_gives_direct_uploads_until_it_can() {
    let dir = test_dir("umad-escape-vl-fails");
    let f = fabric_topology::gen::generate_str(SPEC, None).expect("generate");
    let me = f.end_port(fabric_topology::EndPortId(0));
    let host = format!("H-{:016x}", me.node_guid);
    let my_leaf = match me.attach {
        Some((sw, _)) => f.switch(sw).guid,
        None => panic!("end port 0 is not cabled"),
    };
    let mut sim = Ibsim::start(&dir, &fabric_topology::ibnet::write(&f), host);
    // Another leaf drops every SLtoVLMappingTable SMP (attribute 0x17 = 23) that enters it.
    let leaf = f
        .switches()
        .iter()
        .map(|s| s.guid)
        .filter(|&g| g != my_leaf)
        .find(|&g| {
            let id = f.switch_by_guid(g).expect("switch");
            f.switch(id)
                .external_ports()
                .any(|(_, p)| matches!(p.remote, fabric_topology::Remote::EndPort(_)))
        })
        .expect("another leaf");
    sim.console(&format!("Error \"S-{leaf:016x}\" 100 23"));
    std::fs::write(
        dir.join("fabricd.toml"),
        config("[fault_injection]\nenabled = true\nallow_physical = true\n"),
    )
    .expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &dir.join("fabricd.toml"), &env);
    run_with_deadline(90, async {
        let mut c = d.ready().await;
        next_generation(&d, &mut c, 0, Duration::from_secs(20)).await;
        let topo = topology(&mut c).await;
        let mut sc = d.client().await;
        let (mut stream, first) = subscribe(&mut sc, "escape-vl", &topo.end_ports[3].name).await;
        let id = first.subscriber_id;
        let (sw, port) = switch_links(&topo)[0];
        // The update cannot wait for the escape VL: a direct upload, no notice.
        let r = c
            .inject_fault(link_req(sw, port, false, false, true))
            .await
            .expect("inject")
            .into_inner();
        assert_eq!(r.generation, 2);
        let st = status(&mut c).await;
        assert!(!st.escape_vl_ready, "{st:?}");
        assert!(
            st.escape_vl_error.contains(&format!("0x{leaf:016x}")),
            "the failure names the leaf: {st:?}"
        );
        assert!(st.escape_vl_pending > 0, "{st:?}");
        let quiet = tokio::time::timeout(Duration::from_millis(300), stream.message()).await;
        assert!(quiet.is_err(), "no UNPATH without the escape VL: {quiet:?}");
        // The SMPs go through again: the next update programs the missing tables first, then
        // moves the subscriber.
        sim.console(&format!("Error \"S-{leaf:016x}\" 0"));
        let mut ic = d.client().await;
        let inject = tokio::spawn(async move { ic.inject_fault(link_req(sw, port, true, false, true)).await });
        let n = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("a notice")
            .expect("stream")
            .expect("open");
        assert_eq!((n.generation, n.phase), (3, pb::Phase::Unpath as i32));
        let st = status(&mut c).await;
        assert!(st.escape_vl_ready && st.escape_vl_error.is_empty(), "{st:?}");
        ack_update(&mut sc, &mut stream, id, 3).await;
        assert_eq!(inject.await.expect("join").expect("inject").into_inner().generation, 3);
        // The leaf's tables read back.
        let lid = topo.switches.iter().find(|s| s.guid == leaf).expect("leaf").lid;
        let rows = sl2vl(&sim, lid, Some(1));
        let row = rows.iter().find(|r| r.0 != 1 && r.0 != 0).expect("an input port");
        assert_eq!(row.2[usize::from(fabric_umad::ESCAPE_SL)], fabric_umad::ESCAPE_VL);
    });
}
