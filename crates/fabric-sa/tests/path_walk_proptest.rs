//! On random degraded fat-trees (generated, degraded, routed by `route_all_checked` with
//! LMC 1, then a few links or nodes failed *after* the routing, so that some installed
//! entries lead into dead links), every PathRecord the SA answers agrees with an independent
//! hop-by-hop walk of the model (`fabric_routing::trace`): it exists exactly when the walk
//! delivers (no record for an unreachable pair), `path::walk` counts the walk's links, escape
//! LIDs carry the escape SL, Reversible is the reverse walk, and the whole-fabric table
//! (computed over walk columns) holds exactly the delivered CA-to-CA LID pairs.

mod path_support;

use std::collections::HashSet;

use fabric_routing::{trace, TraceEnd};
use fabric_sa::path::walk;
use fabric_sa::wire::{attr, status, METHOD_GET, METHOD_GET_TABLE};
use fabric_topology::gen::{degrade, generate_str, Degrade};
use fabric_topology::{EndPortId, Fabric, FabricEvent, Remote};
use path_support::*;
use proptest::prelude::*;

fn degraded(spec: &str, links: usize, switches: usize, seed: u64) -> Fabric {
    let f = generate_str(spec, None).unwrap();
    let f = degrade(
        &f,
        &Degrade {
            remove_links: 0,
            remove_switches: switches,
            seed,
        },
    )
    .unwrap();
    let links = links.min(f.count_links().0);
    degrade(
        &f,
        &Degrade {
            remove_links: links,
            remove_switches: 0,
            seed: seed ^ 0x5eed,
        },
    )
    .unwrap()
}

/// Faults after the routing: `picks` index cabled switch ports (link down) and end ports
/// (node down).
fn faults(f: &Fabric, picks: &[(bool, usize)]) -> Fabric {
    let cabled: Vec<_> = f
        .switches()
        .iter()
        .flat_map(|s| {
            s.external_ports()
                .filter(|(_, p)| p.remote != Remote::None)
                .map(move |(pn, _)| (s.guid, pn))
        })
        .collect();
    let events: Vec<FabricEvent> = picks
        .iter()
        .map(|&(node, i)| {
            if node {
                FabricEvent::EndPortDown(f.end_ports()[i % f.num_end_ports()].port_guid)
            } else {
                let (switch, port) = cabled[i % cabled.len()];
                FabricEvent::LinkDown { switch, port }
            }
        })
        .collect();
    f.apply(&events).unwrap()
}

/// The independent walk: links crossed from end port `a` to `dlid` if it reaches end port `b`.
fn model_walk(f: &Fabric, lfts: &fabric_routing::Lfts, a: EndPortId, b: EndPortId, dlid: u32) -> Option<usize> {
    let mut hops = Vec::new();
    match trace(f, lfts, a, dlid, &mut hops) {
        Ok(TraceEnd::EndPort(x)) if x == b => Some(hops.len() + 1),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn path_records_match_the_walk_of_the_installed_tables(
        spec_i in 0usize..3,
        links in 0usize..40,
        switches in 0usize..3,
        seed in any::<u64>(),
        picks in proptest::collection::vec((any::<bool>(), any::<usize>()), 0..3),
        pairs in proptest::collection::vec((any::<usize>(), any::<usize>(), 0u16..2, 0u16..2), 24),
    ) {
        let spec = ["PGFT(3;4,4,6;1,4,4;1,1,1)", "PGFT(3;3,3,4;1,3,2;1,2,1)", "PGFT(2;4,8;1,4;1,1)"][spec_i];
        let r = routed(degraded(spec, links, switches, seed));
        let f = faults(&r.fabric, &picks);
        let s = snapshot(&f, &r.lids, &r.lfts);
        let n = f.num_end_ports();
        let guid = |e: EndPortId| f.end_port(e).port_guid;
        let base = |e: EndPortId| r.lids.base_lid(e) as u16;

        for &(ai, bi, so, dof) in &pairs {
            let (a, b) = (EndPortId((ai % n) as u32), EndPortId((bi % n) as u32));
            let (slid, dlid) = (base(a) + so, base(b) + dof);
            let fwd = if a == b { f.end_port_live(a).then_some(0) } else { model_walk(&f, &r.lfts, a, b, u32::from(dlid)) };
            let rev = if a == b { fwd } else { model_walk(&f, &r.lfts, b, a, u32::from(slid)) };

            // The walk's hop count (a dead node is not in the snapshot at all).
            match s.port_index_by_guid(guid(a)) {
                Some(src) => {
                    let w = walk(&s, src, dlid);
                    prop_assert_eq!(w.as_ref().ok().map(|w| usize::from(w.links)), fwd, "{} -> {}: {:?}", slid, dlid, w);
                }
                None => prop_assert!(!f.end_port(a).up && fwd.is_none()),
            }

            // Get by LIDs: a record exactly when the walk delivers.
            let (t, m) = Template { slid: Some(slid), dlid: Some(dlid), ..Template::default() }.image();
            let ans = ask(&s, &mad(METHOD_GET, attr::PATH_RECORD, m, &t));
            match fwd {
                None => prop_assert_eq!(ans.header.status, status::NO_RECORDS, "{} -> {} unreachable", slid, dlid),
                Some(_) => {
                    prop_assert_eq!(ans.header.status, 0);
                    let p = records(&ans)[0];
                    prop_assert_eq!((p.slid, p.dlid, p.sgid_guid, p.dgid_guid), (slid, dlid, guid(a), guid(b)));
                    prop_assert_eq!(p.sl, if dof == 1 { ESCAPE_SL } else { 0 }, "escape LIDs get the escape SL");
                    prop_assert_eq!(p.reversible, rev.is_some());
                    prop_assert_eq!(p.pkt_life, if a == b { 0 } else { 18 });
                }
            }

            // GetTable by GIDs: one record per delivered LID pair of the LMC ranges.
            let (t, m) = Template { sgid: Some(guid(a)), dgid: Some(guid(b)), ..Template::default() }.image();
            let ans = ask(&s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t));
            if !f.end_port(a).up || !f.end_port(b).up {
                prop_assert_eq!(ans.header.status, status::INVALID_GID);
                continue;
            }
            let want: HashSet<(u16, u16)> = (0..2)
                .flat_map(|x| (0..2).map(move |y| (x, y)))
                .filter(|&(x, y)| {
                    if a == b { f.end_port_live(a) } else { model_walk(&f, &r.lfts, a, b, u32::from(base(b) + y)).is_some() }
                        .then_some(x)
                        .is_some()
                })
                .map(|(x, y)| (base(a) + x, base(b) + y))
                .collect();
            let got: Vec<(u16, u16)> = records(&ans).iter().map(|p| (p.slid, p.dlid)).collect();
            prop_assert_eq!(got.len(), want.len());
            prop_assert_eq!(got.into_iter().collect::<HashSet<_>>(), want);
        }

        // The whole-fabric table (walk columns): exactly the delivered CA-to-CA LID pairs.
        let whole = ask(&s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, 0, &[0; 64]));
        prop_assert_eq!(whole.header.status, 0);
        let by_guid: std::collections::HashMap<u64, EndPortId> = f.end_port_ids().map(|e| (guid(e), e)).collect();
        let mut got = HashSet::new();
        for p in records(&whole) {
            if let (Some(&a), Some(&b)) = (by_guid.get(&p.sgid_guid), by_guid.get(&p.dgid_guid)) {
                prop_assert!(got.insert((p.slid, p.dlid)), "duplicate {:?}", p);
                let fwd = if a == b { f.end_port_live(a).then_some(0) } else { model_walk(&f, &r.lfts, a, b, u32::from(p.dlid)) };
                prop_assert!(fwd.is_some(), "{:?} answered but not delivered", p);
                let rev = if a == b { fwd } else { model_walk(&f, &r.lfts, b, a, u32::from(p.slid)) };
                prop_assert_eq!(p.reversible, rev.is_some(), "{:?}", p);
                prop_assert_eq!(p.sl, if p.dlid == base(b) + 1 { ESCAPE_SL } else { 0 });
            }
        }
        let mut delivered = 0;
        for a in f.end_port_ids() {
            for b in f.end_port_ids() {
                for dof in 0..2u16 {
                    let ok = if a == b { f.end_port_live(a) } else { model_walk(&f, &r.lfts, a, b, u32::from(base(b) + dof)).is_some() };
                    delivered += usize::from(ok) * 2; // both source LIDs
                }
            }
        }
        prop_assert_eq!(got.len(), delivered);

        // The tables with one end fixed (walk columns for the fixed end's LIDs) are the whole
        // table's records of that end, in the same order (destinations in port order, each
        // pair's LIDs in OpenSM's order).
        let all = records(&whole);
        let x = f.end_port(EndPortId((pairs[0].0 % n) as u32)).port_guid;
        if f.end_port(EndPortId((pairs[0].0 % n) as u32)).up {
            for (source, tmpl) in [
                (true, Template { sgid: Some(x), ..Template::default() }),
                (false, Template { dgid: Some(x), ..Template::default() }),
            ] {
                let (t, m) = tmpl.image();
                let half = records(&ask(&s, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t)));
                let want: Vec<_> = all
                    .iter()
                    .copied()
                    .filter(|p| if source { p.sgid_guid == x } else { p.dgid_guid == x })
                    .collect();
                prop_assert_eq!(half, want, "{} table of {:#x}", if source { "source" } else { "destination" }, x);
            }
        }
    }
}
