//! Unit tests of load-aware Dmodc: the load-aware kernel itself (not Dmodc's, which the engine
//! runs on intact fabrics) writes Dmodc's bytes on complete PGFTs, and the plan recognises
//! them as intact.

use super::plan::Plan;
use super::route_lb;
use crate::fill::Prepared;
use crate::testutil::*;
use crate::{Dmodc, Lfts, LidSet, RoutingEngine};

fn shapes() -> Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> {
    vec![
        (vec![4, 4, 6], vec![1, 4, 4], vec![1, 1, 1]),
        (vec![3, 3, 4], vec![1, 3, 2], vec![1, 2, 1]),
        (vec![2, 3, 2, 3], vec![1, 2, 3, 2], vec![1, 1, 2, 1]),
        (vec![6, 4], vec![1, 3], vec![1, 2]),
        (vec![4, 3, 4], vec![1, 3, 2], vec![1, 2, 1]),
    ]
}

#[test]
fn kernel_writes_dmodc_bytes_on_complete_pgfts() {
    for (m, w, p) in shapes() {
        let t = pgft(&m, &w, &p);
        let r = Routable::new(t.fabric);
        let ctx = r.ctx();
        let prep = Prepared::new(&r.fabric, &r.ranking.level);
        let plan = Plan::new(&r.fabric, &prep).unwrap();
        assert!(plan.intact, "{m:?} {w:?} {p:?}");
        for set in [LidSet::Base, LidSet::Escape] {
            let mut a = Lfts::new(r.fabric.num_switches(), r.lids.top());
            let mut b = Lfts::new(r.fabric.num_switches(), r.lids.top());
            Dmodc.route(&ctx, set, &mut a).unwrap();
            route_lb(&ctx, set, &mut b, true);
            assert!(a == b, "{m:?} {w:?} {p:?} {set:?}");
        }
    }
}

#[test]
fn degraded_pgfts_are_not_intact() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let f = degrade(&t.fabric, 3, 0, 7);
    let r = Routable::new(f);
    let prep = Prepared::new(&r.fabric, &r.ranking.level);
    let plan = Plan::new(&r.fabric, &prep).unwrap();
    assert!(!plan.intact);
}
