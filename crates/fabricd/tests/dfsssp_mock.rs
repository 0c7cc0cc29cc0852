//! Issue #19, deliverable 4: the daemon installs DFSSSP (`engine = "dfsssp"`) on the mock
//! driver's `SLIMFLY(5;4)` (the Slim Fly paper's deployment): the generation is committed with
//! its VL layering, status and `fabricctl status` report the VLs, the tables are valid, each
//! layer's channel dependencies are acyclic on the installed tables, and PathRecords (gRPC
//! SaQuery) carry the SL of their layer (escape LIDs the escape SL). A driver whose data VLs
//! do not suffice gets nothing installed and status says why.

mod common;

use std::time::Duration;

use common::installed;
use common::*;
use fabric_proto::v1 as pb;
use fabric_routing::check::cdg_acyclic_per_layer;
use fabric_routing::vl::{base_lids, sl_of_layer, VlLayering};
use fabric_routing::EngineKind;
use fabric_topology::gen::generate_str;

const SPEC: &str = "SLIMFLY(5;4)";

fn opts(extra_mock: &str) -> Opts {
    let mut o = Opts::new(SPEC);
    o.extra = format!("\n[routing]\nengine = \"dfsssp\"\n{extra_mock}");
    o
}

#[test]
fn dfsssp_on_the_papers_slim_fly_is_installed_with_its_layers_and_path_sls() {
    let dir = test_dir("dfsssp-mock");
    let d = Daemon::spawn(&dir, &opts(""), &[]);
    run_with_deadline(240, async {
        let mut c = d.ready().await;
        let s = wait_status(&d, &mut c, "first generation", Duration::from_secs(120), |s| {
            s.generation >= 1
        })
        .await;
        assert!(s.routing_valid, "{s:?}\n{}", d.log_text());
        assert_eq!(s.routed_by, "dfsssp", "the agnostic mode keeps dfsssp: {s:?}");
        assert!(s.vl_layers >= 2, "{s:?}");
        assert_eq!(
            s.data_vls,
            s.vl_layers + 1,
            "layers on VL 0, 2, ..; escape on VL 1: {s:?}"
        );
        assert!(s.last_error.is_empty(), "{s:?}");

        let f = generate_str(SPEC, None).unwrap();
        let lids = installed::lid_plan(&d, &f, 1);
        let (_, rows) = lfts(&mut c).await;
        let t = installed::tables(&f, &lids, &rows);
        assert!(fabric_routing::check::validity(&f, &lids, &t).valid);
        let l: VlLayering = fabric_routing::vl_layering(EngineKind::Dfsssp, &f, &lids, &t, 15)
            .unwrap()
            .unwrap();
        assert_eq!(u32::from(l.num_layers), s.vl_layers);
        let acyclic = cdg_acyclic_per_layer(&f, &[&t], &base_lids(&f, &lids), &l);
        assert!(acyclic.iter().all(|&x| x), "per-layer CDG: {acyclic:?}");

        // The SA answers once its snapshot follows the commit.
        let mut checked = 0usize;
        let sources: Vec<_> = f.end_port_ids().step_by(23).collect();
        for &e in &sources {
            let ep = f.end_port(e);
            let sw = ep.attach.unwrap().0;
            let recs = installed::paths_from_when_ready(&mut c, ep.port_guid, &ep.desc).await;
            for (dlid, dguid, sl) in recs {
                // Destinations are end ports and switches (port 0).
                let escape = f.end_port_by_guid(dguid).and_then(|e| lids.escape_lid(e));
                let want = if escape == Some(fabric_topology::Lid::from(dlid)) {
                    1
                } else {
                    sl_of_layer(l.layer_of(0, sw, fabric_topology::Lid::from(dlid)), lids.lmc)
                };
                assert_eq!(sl, want, "{} -> LID {dlid}", ep.desc);
                checked += 1;
            }
        }
        assert!(checked >= sources.len() * 400, "{checked} PathRecords checked");

        // GetPath with a source gives the same SL as the SA.
        let (a, b) = (f.end_port(sources[1]), f.end_port(sources[2]));
        let p = c
            .get_path(pb::GetPathRequest {
                dst: format!("{:#018x}", b.port_guid),
                src: format!("{:#018x}", a.port_guid),
            })
            .await
            .expect("GetPath")
            .into_inner();
        assert!(p.base_sl_per_source);
        let want = sl_of_layer(
            l.layer_of(0, a.attach.unwrap().0, p.base_lid as fabric_topology::Lid),
            lids.lmc,
        );
        assert_eq!(p.base_sl, u32::from(want), "{p:?}");

        // `fabricctl status` reports them.
        let socket = d.socket.display().to_string();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(fabricctl_binary())
                .args(["--socket", &socket, "status", "--json"])
                .output()
                .expect("run fabricctl")
        })
        .await
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["vl_layers"].as_u64(), Some(u64::from(s.vl_layers)), "{v}");
        assert_eq!(v["data_vls"].as_u64(), Some(u64::from(s.data_vls)), "{v}");
    });
}

#[test]
fn too_few_data_vls_refuse_the_generation_and_status_says_why() {
    let dir = test_dir("dfsssp-mock-refused");
    // Ports with 2 data VLs (VL 0 and the escape VL 1): no room for a second layer.
    let prom = free_port();
    let text = opts(&format!("\n[prometheus]\nlisten = \"127.0.0.1:{prom}\"\n"))
        .config_text()
        .replace(
            &format!("generator = \"{SPEC}\""),
            &format!("generator = \"{SPEC}\"\ndata_vls = 2"),
        );
    let cfg = dir.join("fabricd.toml");
    std::fs::write(&cfg, text).expect("write config");
    let d = Daemon::spawn_with_config(&dir, &cfg, &[]);
    run_with_deadline(180, async {
        let mut c = d.client().await;
        let s = wait_status(&d, &mut c, "the refusal", Duration::from_secs(120), |s| {
            !s.last_error.is_empty()
        })
        .await;
        assert_eq!(s.generation, 0, "nothing installed: {s:?}");
        assert!(!s.tables_installed, "{s:?}");
        assert_eq!(s.data_vl_capacity, 2, "{s:?}");
        let e = &s.last_error;
        assert!(
            e.contains("needs 2 virtual layers") || e.contains("virtual layers (VLs)"),
            "{e}"
        );
        assert!(e.contains("only 1 are available"), "{e}");
        assert!(e.contains("nothing installed"), "{e}");
        assert!(d.log_text().contains("generation refused"), "{}", d.log_text());
        // No table was written to the simulated switches: no path is delivered.
        let r = c
            .verify_reachability(pb::VerifyReachabilityRequest { escape: false })
            .await;
        assert!(
            r.as_ref().map_or(true, |r| r.get_ref().pairs_checked == 0
                || r.get_ref().unreachable_count > 0),
            "{r:?}"
        );
        // The refusal metric.
        let m = tokio::task::spawn_blocking(move || http_get(prom, "/metrics"))
            .await
            .unwrap();
        assert!(
            m.lines()
                .any(|l| l.starts_with("fabricd_routing_vl_refusals_total") && !l.ends_with(" 0")),
            "{m}"
        );
    });
}
