mod common;
use common::*;
use fabric_routing::EngineKind;

#[test]
#[ignore]
fn explore() {
    let sp_ = "PGFT(3;18,18,24;1,18,18;1,1,1)";
    let cables = spec(sp_).num_cables() as usize;
    for (pct, seed) in [(0usize, 0u64), (5, 1), (5, 2), (5, 3)] {
        let f = degraded(sp_, cables * pct / 100, 0, seed);
        for kind in [EngineKind::Dmodc] {
            let r = route_with(&f, kind, 1);
            let sp = mu_sp(&r);
            let rp = mu_rp(&r, 200, seed);
            println!(
                "{pct}% seed {seed} {kind}: sp {sp} rp median {} q1 {} q39 {}",
                rp[rp.len() / 2],
                rp[rp.len() / 40],
                rp[rp.len() * 39 / 40]
            );
        }
    }
}
