//! What the simulated hosts see: the MFTs (`ibroute -M`) and P_Key tables (`smpquery pkeys`)
//! read back from the switches and ports, PathRecords (`saquery --src-to-dst`), the records
//! `fabric-saquery` prints, `fabric-saquery` run on many hosts at once, and the partitions
//! file of the partition test.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use fabric_ibsim_harness::saquery::saquery;
use fabric_ibsim_harness::{parse_ibroute_mcast, parse_smpquery_pkeys, Ibsim};
use fabric_sa::records::{McMemberRecord, Record};
use fabric_topology::{EndPortId, Fabric, Guid};

use super::{Dead, Mft};
use crate::support::{dr_path, fabric_saquery, host, spawn_fabric_saquery, ClientRun, Lids};

/// The MFT of every switch (`ibroute -M -D <route>` from end port `from` over live cables).
pub fn read_mfts(sim: &Ibsim, host_id: &str, f: &Fabric, from: EndPortId, dead: &Dead) -> HashMap<Guid, Mft> {
    f.switch_ids()
        .map(|s| {
            let path = dr_path(f, from, s, dead);
            let (ok, text) = sim.tool_on(host_id, "ibroute", &["-M", "-D", &path]);
            assert!(ok, "ibroute -M -D {path} failed:\n{text}");
            (f.switch(s).guid, parse_ibroute_mcast(&text))
        })
        .collect()
}

/// Reads the MFTs until `check` holds for them (the last upload may still be running), at
/// most `within`; panics with the last error.
pub fn wait_mfts<T>(
    sim: &Ibsim,
    host_id: &str,
    f: &Fabric,
    from: EndPortId,
    dead: &Dead,
    within: Duration,
    check: impl Fn(&HashMap<Guid, Mft>) -> Result<T, String>,
) -> (HashMap<Guid, Mft>, T) {
    let t0 = Instant::now();
    loop {
        let mfts = read_mfts(sim, host_id, f, from, dead);
        match check(&mfts) {
            Ok(v) => return (mfts, v),
            Err(e) => assert!(
                t0.elapsed() < within,
                "the switches' MFTs (ibroute -M) are still wrong after {within:?}:\n{e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A port's P_Key table as `smpquery pkeys <lid> <port>` shows it, without the empty entries.
pub fn pkeys(sim: &Ibsim, host_id: &str, lid: u64, port: u8) -> BTreeSet<u16> {
    let (ok, text) = sim.tool_on(host_id, "smpquery", &["pkeys", &lid.to_string(), &port.to_string()]);
    assert!(ok, "smpquery pkeys {lid} {port} failed:\n{text}");
    parse_smpquery_pkeys(&text).into_iter().filter(|&p| p != 0).collect()
}

/// The MCMemberRecords of a `fabric-saquery` answer (those delivered whole).
pub fn mc_records(r: &ClientRun) -> Vec<McMemberRecord> {
    r.delivered_records()
        .iter()
        .map(|b| McMemberRecord::decode(b).unwrap_or_else(|e| panic!("MCMemberRecord image: {e}")))
        .collect()
}

/// Every JSON document a `fabric-saquery` run printed (one per line).
pub fn json_lines(r: &ClientRun) -> Vec<serde_json::Value> {
    r.stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("fabric-saquery {:?}: {e}: {l}", r.args)))
        .collect()
}

/// Runs `fabric-saquery <args(end port)>` on the host of every end port of `ports`, at most
/// `parallel` at once (the simulator takes 10 clients), each within `within`; every run must
/// exit 0 and every answer have status 0.
pub fn on_each_host(
    sim: &Ibsim,
    f: &Fabric,
    ports: &[EndPortId],
    parallel: usize,
    within: Duration,
    args: impl Fn(EndPortId) -> Vec<String>,
) {
    let mut running: VecDeque<(
        EndPortId,
        std::process::Child,
        std::path::PathBuf,
        std::path::PathBuf,
        Instant,
    )> = VecDeque::new();
    let mut next = ports.iter();
    loop {
        while running.len() < parallel {
            let Some(&e) = next.next() else { break };
            let a = args(e);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let (child, out, err) = spawn_fabric_saquery(sim, &host(f, e), &a, &format!("host-{}", e.0));
            running.push_back((e, child, out, err, Instant::now()));
        }
        let Some((e, mut child, out, err, t0)) = running.pop_front() else {
            return;
        };
        loop {
            if let Some(st) = child.try_wait().expect("wait fabric-saquery") {
                let stdout = std::fs::read_to_string(&out).unwrap_or_default();
                let stderr = std::fs::read_to_string(&err).unwrap_or_default();
                assert!(
                    st.success(),
                    "fabric-saquery on {}: {st}\n{stdout}\n{stderr}",
                    host(f, e)
                );
                for l in stdout.lines().filter(|l| l.starts_with('{')) {
                    let v: serde_json::Value = serde_json::from_str(l).expect("JSON");
                    assert_eq!(v["status"], 0, "fabric-saquery on {}: {l}", host(f, e));
                }
                break;
            }
            if t0.elapsed() > within {
                let _ = child.kill();
                let _ = child.wait();
                panic!("fabric-saquery on {} did not finish within {within:?}", host(f, e));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// `fabric-saquery mcast-cycles <args>` on `host_id`: its `mcast_cycles` document.
pub fn cycles(sim: &Ibsim, host_id: &str, args: &[&str], within: Duration) -> serde_json::Value {
    let mut a = vec!["mcast-cycles"];
    a.extend_from_slice(args);
    let r = fabric_saquery(sim, host_id, &a, within);
    assert!(r.ok, "fabric-saquery {a:?} failed:\n{}\n{}", r.stdout, r.stderr);
    r.json()["mcast_cycles"].clone()
}

/// The P_Key of a PathRecord `saquery --src-to-dst a:b` answers, `None` when it answers none.
pub fn path_pkey(sim: &Ibsim, host_id: &str, a: u64, b: u64) -> Option<u64> {
    let arg = format!("{a}:{b}");
    let r = saquery(sim, host_id, &["--src-to-dst", &arg]);
    if !r.ok {
        // An error status instead of an empty table: only "no records" means no path.
        assert!(
            r.text.contains("0x0300") || r.text.to_ascii_lowercase().contains("no records"),
            "saquery --src-to-dst {arg} failed:\n{}",
            r.text
        );
        return None;
    }
    let recs = r.real_records();
    assert!(recs.len() <= 1, "saquery --src-to-dst {arg}: {recs:?}");
    recs.first().map(|p| p.n("pkey"))
}

/// The partitions file: every CA a full member of the default partition but the blue and red
/// ports (limited there, so that a blue and a red port share no partition), `blue` (IPoIB)
/// and `red` with their GUIDs.
pub fn partitions_file(blue: &[Guid], red: &[Guid]) -> String {
    let list = |v: &[Guid], m: &str| {
        v.iter()
            .map(|g| format!("0x{g:016x}={m}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let limited: Vec<Guid> = blue.iter().chain(red).copied().collect();
    format!(
        "# umad_mcast acceptance\nDefault=0x7fff, ipoib : ALL=full, {} ;\nblue=0x8001, ipoib :\n  {} ;\nred=0x8002 : {} ;\n",
        list(&limited, "limited"),
        list(blue, "full"),
        list(red, "full")
    )
}

/// Every CA's P_Key table (`smpquery pkeys`) equals the model: blue ports 0x7fff and 0x8001,
/// red ports 0x7fff and 0x8002, every other one 0xffff only.
pub fn check_pkeys(
    sim: &Ibsim,
    host_id: &str,
    f: &Fabric,
    lids: &Lids,
    blue: &[Guid],
    red: &[Guid],
) -> Result<(), String> {
    let mut wrong = Vec::new();
    for e in f.end_ports() {
        let want: BTreeSet<u16> = if blue.contains(&e.port_guid) {
            [0x7fff, 0x8001].into()
        } else if red.contains(&e.port_guid) {
            [0x7fff, 0x8002].into()
        } else {
            [0xffff].into()
        };
        let got = pkeys(sim, host_id, lids.base(e.port_guid), e.port_num);
        if got != want {
            wrong.push(format!(
                "0x{:016x}: smpquery pkeys {got:x?}, configured {want:x?}",
                e.port_guid
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}
