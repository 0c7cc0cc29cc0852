//! Issue #19, deliverable 4 with real parts: fabricd (umad driver under the umad2sim shim)
//! installs DFSSSP (`[routing] engine = "dfsssp"`) on `fabricctl topo gen 'SLIMFLY(5;4)'` (the
//! Slim Fly paper's deployment) run by `ibsim`. Checked on what the switches hold, not on the
//! daemon's view: the tables read back with `ibroute` (by directed route) bring every switch to
//! every end port's base and escape LID; the VL layering of those read-back tables (computed
//! here) has every layer's CDG acyclic and as many layers as status reports; `saquery -p
//! --src-to-dst` (PathRecord through the daemon's SA) answers the SL of the route's layer (the
//! escape SL for escape LIDs); `smpquery sl2vl` shows the identity plan on the data VLs.
//!
//! Needs `ibsim` (ibsim-utils), `ibroute`, `saquery` and `smpquery` (infiniband-diags).

mod common;
mod umad_sim;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{run_with_deadline, test_dir, topology};
use fabric_ibsim_harness::saquery::saquery;
use fabric_ibsim_harness::Ibsim;
use fabric_proto::v1 as pb;
use fabric_routing::check::cdg_acyclic_per_layer;
use fabric_routing::vl::{base_lids, sl_of_layer};
use fabric_routing::{assign_lids, EngineKind, Guid2Lid, Lfts};
use fabric_topology::{EndPortId, Fabric, Lid};
use umad_sim::tables::{dr_paths, end_port_lids, read_back, walk_all};
use umad_sim::{config, next_generation};

const SPEC: &str = "SLIMFLY(5;4)";

/// The read-back tables (`ibroute`, LID → port) as dense rows of `f`.
fn dense(f: &Fabric, top: Lid, tables: &HashMap<u64, BTreeMap<u64, u64>>) -> Lfts {
    let mut t = Lfts::new(f.num_switches(), top);
    for s in f.switch_ids() {
        for (&lid, &port) in &tables[&f.switch(s).guid] {
            if lid <= u64::from(top) {
                t.set(s, lid as Lid, port as u8);
            }
        }
    }
    t
}

#[test]
fn umad_slim_fly_dfsssp_is_programmed_with_its_vl_layers_and_path_sls() {
    let dir = test_dir("umad-dfsssp");
    let file = dir.join("slimfly.ibnet");
    let out = std::process::Command::new(common::fabricctl_binary())
        .args(["topo", "gen", SPEC, "-o"])
        .arg(&file)
        .output()
        .expect("run fabricctl topo gen");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).expect("read the generated file");
    let f = fabric_topology::ibnet::parse(&text, "slimfly").expect("parse").fabric;
    let host = format!("H-{:016x}", f.end_port(EndPortId(0)).node_guid);
    let sim = Ibsim::start(&dir, &text, host.clone());
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, config("[routing]\nengine = \"dfsssp\"\n")).expect("write config");
    let env = sim.env();
    let d = umad_sim::spawn_daemon(&dir, &cfg, &env);
    run_with_deadline(170, async {
        let mut c = d.ready().await;
        let s = next_generation(&d, &mut c, 0, Duration::from_secs(60)).await;
        assert_eq!(s.driver, "umad");
        assert_eq!(s.routed_by, "dfsssp", "{s:?}\n{}", d.log_text());
        assert!(s.routing_valid && s.unreachable_pairs == 0, "{s:?}");
        assert!(s.vl_layers >= 2 && s.data_vls == s.vl_layers + 1, "{s:?}");
        let topo = topology(&mut c).await;
        let dests = end_port_lids(&topo);
        assert_eq!(dests.len(), 400);
        let lft = c
            .get_lft(pb::GetLftRequest {
                switch: String::new(),
                format: pb::LftFormat::Raw as i32,
            })
            .await
            .expect("GetLft")
            .into_inner();
        let sim = &sim;
        let paths = dr_paths(&f);
        let tables = read_back(sim, &f);
        let bad = walk_all(&f, &tables, &dests);
        assert!(
            bad.is_empty(),
            "{} walks fail, e.g. {:?}",
            bad.len(),
            &bad[..bad.len().min(5)]
        );

        // The layering of what the switches hold.
        let mut g2l = Guid2Lid::new();
        for e in &topo.end_ports {
            g2l.insert(e.guid, e.base_lid as Lid, e.escape_lid as Lid);
        }
        for s in &lft.switches {
            g2l.insert(s.guid, s.lid as Lid, s.lid as Lid);
        }
        let lids = assign_lids(&f, &g2l, 1, 0xbfff).expect("the daemon's LIDs");
        let t = dense(&f, lids.top(), &tables);
        assert!(fabric_routing::check::validity(&f, &lids, &t).valid);
        let l = fabric_routing::vl_layering(EngineKind::Dfsssp, &f, &lids, &t, 15)
            .unwrap()
            .unwrap();
        assert_eq!(u32::from(l.num_layers), s.vl_layers);
        let acyclic = cdg_acyclic_per_layer(&f, &[&t], &base_lids(&f, &lids), &l);
        assert!(acyclic.iter().all(|&x| x), "per-SL CDG: {acyclic:?}");

        // PathRecords through the daemon's SA: the SL of the route's layer from the source's
        // switch; the escape SL for escape LIDs.
        let mut checked = 0;
        let mut sls_seen = std::collections::BTreeSet::new();
        for (i, a) in f.end_port_ids().step_by(13).enumerate() {
            let b = EndPortId((a.0 * 7 + 11 + i as u32) % f.num_end_ports() as u32);
            if a == b {
                continue;
            }
            let sw = f.end_port(a).attach.unwrap().0;
            for (slid, dlid, want) in [
                (
                    lids.base_lid(a),
                    lids.base_lid(b),
                    sl_of_layer(l.layer_of(0, sw, lids.base_lid(b))),
                ),
                (lids.escape_lid(a).unwrap(), lids.escape_lid(b).unwrap(), 1),
            ] {
                let arg = format!("{slid}:{dlid}");
                let r = saquery(sim, &host, &["-p", "--src-to-dst", &arg]).real_records();
                assert_eq!(r.len(), 1, "saquery -p --src-to-dst {arg}: {r:?}");
                assert_eq!(r[0].n("sl"), u64::from(want), "saquery -p --src-to-dst {arg}");
                sls_seen.insert(want);
                checked += 1;
            }
        }
        assert!(checked >= 30, "{checked} PathRecords checked");
        assert!(
            sls_seen.len() >= 3,
            "SLs seen: {sls_seen:?} (layers 0 and 2.. plus the escape 1)"
        );

        // The SL-to-VL tables: SL i on VL i for every data VL of the plan, on a switch port pair
        // and on a CA port.
        let sw0 = &lft.switches[0];
        let (ok, out) = sim.tool_on(&host, "smpquery", &["-D", "sl2vl", &paths[&sw0.guid], "1"]);
        assert!(ok, "smpquery sl2vl: {out}");
        let (ok, ca) = sim.tool_on(
            &host,
            "smpquery",
            &["sl2vl", &topo.end_ports[0].base_lid.to_string(), "1"],
        );
        assert!(ok, "smpquery sl2vl (CA): {ca}");
        for text in [&out, &ca] {
            let vls = parse_sl2vl(text);
            for sl in 0..s.data_vls as usize {
                assert_eq!(vls.get(sl).copied(), Some(sl as u8), "SL {sl}: {text}");
            }
        }
    });
}

/// The 16 VLs of `smpquery sl2vl` output (`...|0 |1 |2 ...|`: the last line of numbers).
fn parse_sl2vl(text: &str) -> Vec<u8> {
    text.lines()
        .rev()
        .map(|l| {
            l.split(['|', ' ', '\t'])
                .filter_map(|x| x.trim().parse::<u8>().ok())
                .collect::<Vec<u8>>()
        })
        .find(|v| v.len() >= 16)
        .map(|v| v[v.len() - 16..].to_vec())
        .unwrap_or_default()
}
