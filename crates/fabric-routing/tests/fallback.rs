//! The always-on validity check and its Up*/Down* fallback on randomly degraded fat-trees:
//! the per-destination check counts exactly what pair walks count, and after
//! `route_all_checked` every connected pair is reachable over the base and escape LIDs, both
//! LID sets are deadlock-free, the escape LIDs are untouched, and a fallback is reported
//! exactly when the engine alone was invalid.

mod common;

use common::*;
use proptest::prelude::*;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::check::{self, TraceEnd};
use fabric_routing::{
    assign_lids, route_all_checked, EngineKind, Fallback, Guid2Lid, LidSet, RoutingContext, IB_MAX_UNICAST_LID,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn checked_routing_is_valid_and_deadlock_free_on_degraded_fat_trees(
        spec_i in 0usize..3,
        links in 0usize..60,
        switches in 0usize..4,
        seed in any::<u64>(),
    ) {
        let s = ["PGFT(3;4,4,6;1,4,4;1,1,1)", "PGFT(3;3,3,4;1,3,2;1,2,1)", "PGFT(2;4,8;1,4;1,1)"][spec_i];
        let f = degraded(s, links, switches, seed);
        let ranking = rank(&f, &RankOptions::default());
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let ctx = RoutingContext { fabric: &f, ranking: &ranking, lids: &lids };
        let plain = fabric_routing::route_all(&ctx, EngineKind::Dmodc).unwrap().lfts;
        let (routed, c) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();

        // The linear check agrees with the pair-walking reference on the engine's own tables.
        let before = check::validity(&f, &lids, &plain);
        prop_assert_eq!(c.engine_unreachable_pairs, before.unreachable_count);
        let d = check::destination_check(&f, &lids, &plain, LidSet::Base);
        let mut hops = Vec::new();
        let live: Vec<_> = f.end_port_ids().filter(|&e| f.end_port_live(e)).collect();
        for fd in &d.failing {
            let walked = live
                .iter()
                .filter(|&&src| src != fd.end_port)
                .filter(|&&src| !matches!(check::trace(&f, &plain, src, fd.lid, &mut hops), Ok(TraceEnd::EndPort(x)) if x == fd.end_port))
                .count() as u64;
            // Walks from other components fail too: they are disconnected, not unreachable.
            prop_assert!(walked >= fd.unreachable_sources);
        }
        prop_assert_eq!(c.engine_failed_destinations, d.failing.len() as u64);
        prop_assert_eq!(c.disconnected_pairs, before.disconnected_pairs);

        // After the fallback: valid (Up*/Down* reaches every connected pair) and deadlock-free.
        let after = check::validity(&f, &lids, &routed.lfts);
        prop_assert!(after.valid, "{} -{} links -{} switches seed {}: {:?} / {:?}", s, links, switches, seed, after, c);
        prop_assert!(c.valid);
        prop_assert_eq!(c.unreachable_pairs, 0);
        prop_assert!(check::cdg_acyclic(&f, &lids, &routed.lfts, LidSet::Base));
        prop_assert!(check::cdg_acyclic(&f, &lids, &routed.lfts, LidSet::Escape));
        // The fallback is reported exactly when the engine alone was invalid: end ports, or (on
        // a fabric so degraded that it is no longer ranked as a fat-tree) switch LIDs.
        let engine_valid = before.unreachable_count == 0 && c.engine_switch_unreachable_pairs == 0;
        prop_assert_eq!(engine_valid, c.fallback == Fallback::None, "{:?}", c);
        prop_assert!(c.switch_lids_checked || c.engine_switch_unreachable_pairs == 0);
        prop_assert_eq!(c.switch_unreachable_pairs, 0, "{:?}", c);
        prop_assert_eq!(c.reason.is_empty(), c.fallback == Fallback::None);
        if c.fallback == Fallback::None {
            prop_assert!(routed.lfts == plain);
        }
        // Escape LIDs are never touched.
        for e in f.end_port_ids() {
            let l = lids.base_lid(e) + 1;
            for sw in f.switch_ids() {
                prop_assert_eq!(routed.lfts.get(sw, l), plain.get(sw, l));
            }
        }
    }
}
