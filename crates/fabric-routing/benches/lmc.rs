//! LMC ≥ 2 costs (issue #19 deliverable 3): `route_all_checked` (ranking excluded: the same for
//! every LMC) with LMC 1, 2 and 3 on the 8 640-node `PGFT(3;24,12,30;1,12,12;1,2,1)` (Dmodc,
//! 24-bit addresses: 8 LIDs per end port exceed 0xBFFF) and on the Slim Fly SLIMFLY(5;4)
//! (`layered:K` on its offsets, and the VL layering of the union, `vl::layer_base`).
//!
//! Not criterion: one full routing of the large fabric takes a fraction of a second; the median
//! and range of 3 runs are printed. `cargo bench -p fabric-routing --bench lmc`.

use std::time::Instant;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::vl::{layer_base, max_base_layers, IB_MAX_DATA_VLS};
use fabric_routing::{assign_lids, route_all_checked, EngineKind, Guid2Lid, RoutingContext};
use fabric_topology::gen::generate_str;

fn median3(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let cases: &[(&str, EngineKind, &[u8])] = &[
        ("PGFT(3;24,12,30;1,12,12;1,2,1)", EngineKind::Dmodc, &[1, 2, 3]),
        ("SLIMFLY(5;4)", EngineKind::Sssp, &[1, 2]),
        ("SLIMFLY(5;4)", EngineKind::Layered { k: 3, seed: 0 }, &[2]),
        ("SLIMFLY(5;4)", EngineKind::Layered { k: 7, seed: 0 }, &[3]),
    ];
    println!("fabric | engine | LMC | top LID | route_all_checked ms median (min–max) | LFT MB | VL layers");
    for &(spec, kind, lmcs) in cases {
        if filter
            .as_deref()
            .is_some_and(|f| !spec.contains(f) && !kind.to_string().contains(f))
        {
            continue;
        }
        let f = generate_str(spec, None).expect("fabric");
        let ranking = rank(&f, &RankOptions::default());
        for &lmc in lmcs {
            let lids = assign_lids(&f, &Guid2Lid::default(), lmc, 0xFF_FFFF).expect("lids");
            let ctx = RoutingContext {
                fabric: &f,
                ranking: &ranking,
                lids: &lids,
            };
            let mut times = Vec::new();
            let mut last = None;
            for _ in 0..3 {
                let t = Instant::now();
                let (r, c) = route_all_checked(&ctx, kind, None).expect("route");
                times.push(t.elapsed().as_secs_f64() * 1e3);
                assert!(c.valid, "{spec} {kind} LMC {lmc}: {c:?}");
                last = Some(r);
            }
            let r = last.expect("routed");
            let vls = match kind {
                EngineKind::Dmodc => "-".to_string(),
                _ => match layer_base(&f, &lids, &r.lfts, max_base_layers(IB_MAX_DATA_VLS, lids.lmc)) {
                    Ok(v) => v.needed.to_string(),
                    Err(e) => e.to_string(),
                },
            };
            let (m, lo, hi) = median3(times);
            println!(
                "{spec} | {kind} | {lmc} | {} | {m:.1} ({lo:.1}–{hi:.1}) | {:.1} | {vls}",
                lids.top(),
                r.lfts.as_bytes().len() as f64 / 1e6
            );
        }
    }
}
