//! Issue #19, deliverable 3: the daemon installs layered multipath routing (`engine =
//! "layered:3"`, seed 003 §4.2–4.3 Alg. 1) with LMC 2 on the mock driver's `SLIMFLY(5;4)`:
//! layer `i` on LID offset `i` of every end port (offsets 0–2), the escape on offset 3; the
//! union of the layers is layered over VLs so that each VL's channel dependencies are acyclic
//! on the installed tables; PathRecords carry the SL of each layer's route, and a pair's layers
//! give several distinct paths.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::installed;
use common::*;
use fabric_routing::check::{cdg_acyclic_per_layer, trace, TraceEnd};
use fabric_routing::vl::{base_lids, sl_of_layer};
use fabric_routing::EngineKind;
use fabric_topology::gen::generate_str;
use fabric_topology::Lid;

const SPEC: &str = "SLIMFLY(5;4)";

#[test]
fn layered_multipath_is_installed_on_the_lid_offsets_with_its_vl_layers() {
    let dir = test_dir("layered-mock");
    let mut opts = Opts::new(SPEC);
    opts.extra = "\n[routing]\nengine = \"layered:3\"\nlmc = 2\n".into();
    let d = Daemon::spawn(&dir, &opts, &[]);
    run_with_deadline(240, async {
        let mut c = d.ready().await;
        let s = wait_status(&d, &mut c, "first generation", Duration::from_secs(120), |s| {
            s.generation >= 1
        })
        .await;
        assert!(s.routing_valid, "{s:?}\n{}", d.log_text());
        assert!(s.last_error.is_empty(), "{s:?}");
        assert_eq!(s.lmc, 2, "{s:?}");
        assert!(s.routed_by.starts_with("layered"), "{s:?}");
        assert!(s.vl_layers >= 1 && s.data_vls == s.vl_layers + 1, "{s:?}");

        let f = generate_str(SPEC, None).unwrap();
        let lids = installed::lid_plan(&d, &f, 2);
        let (_, rows) = lfts(&mut c).await;
        let t = installed::tables(&f, &lids, &rows);
        assert!(fabric_routing::check::validity(&f, &lids, &t).valid);
        let kind: EngineKind = "layered:3".parse().unwrap();
        let l = fabric_routing::vl_layering(kind, &f, &lids, &t, 15).unwrap().unwrap();
        assert_eq!(u32::from(l.num_layers), s.vl_layers);
        let acyclic = cdg_acyclic_per_layer(&f, &[&t], &base_lids(&f, &lids), &l);
        assert!(acyclic.iter().all(|&x| x), "per-VL CDG: {acyclic:?}");

        // Several paths per pair: the three layer LIDs of a destination take different
        // routes from some source switch.
        let mut hops = Vec::new();
        let eps: Vec<_> = f.end_port_ids().collect();
        let mut multi = 0;
        let mut pairs = 0;
        for &a in eps.iter().step_by(7) {
            for &b in eps.iter().step_by(11).filter(|&&b| b != a) {
                let mut routes = HashSet::new();
                for off in 0..3 {
                    let lid = lids.base_lid(b) + off;
                    assert!(matches!(trace(&f, &t, a, lid, &mut hops), Ok(TraceEnd::EndPort(x)) if x == b));
                    routes.insert(hops.clone());
                }
                pairs += 1;
                multi += usize::from(routes.len() > 1);
            }
        }
        assert!(multi * 2 > pairs, "{multi} of {pairs} pairs have several paths");

        // PathRecords carry each layer route's SL; the escape offset the escape SL.
        let mut checked = 0usize;
        for e in f.end_port_ids().step_by(37) {
            let ep = f.end_port(e);
            let sw = ep.attach.unwrap().0;
            let recs = installed::paths_from_when_ready(&mut c, ep.port_guid, &ep.desc).await;
            let mut sls = HashSet::new();
            for (dlid, dguid, sl) in recs {
                let escape = f.end_port_by_guid(dguid).and_then(|x| lids.escape_lid(x));
                let want = if escape == Some(Lid::from(dlid)) {
                    1
                } else {
                    sl_of_layer(l.layer_of(0, sw, Lid::from(dlid)), lids.lmc)
                };
                assert_eq!(sl, want, "{} -> LID {dlid}", ep.desc);
                sls.insert(sl);
                checked += 1;
            }
            assert!(sls.len() >= 2, "{}: SLs {sls:?}", ep.desc);
        }
        assert!(checked > 1000, "{checked} PathRecords checked");
        eprintln!(
            "layered:3 on {SPEC}: {} VL layers, {multi} of {pairs} pairs multipath, {checked} PathRecords checked",
            s.vl_layers
        );
    });
}
