//! PathRecords with LMC ≥ 2 (issue #19: "PathRecord / GetPath report the layers"): every end
//! port has `2^LMC − 1` layer LIDs (base paths, SL 0) and the escape LID as its last offset (the
//! escape SL). A NumbPath of `2^LMC − 1` answers the layers, on distinct DLIDs; with
//! `layered:K` on the Slim Fly (seed 003 §5.1) they take different routes.

mod path_support;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all_checked, EngineKind, Guid2Lid, RoutingContext, IB_MAX_UNICAST_LID};
use fabric_sa::path::walk;
use fabric_sa::wire::{attr, METHOD_GET_TABLE};
use fabric_topology::gen::generate_str;
use fabric_topology::{EndPortId, Fabric};
use path_support::*;

const PR_MASK_NUMB_PATH: u64 = 1 << 12;

fn routed_lmc(fabric: Fabric, lmc: u8, kind: EngineKind) -> Routed {
    let ranking = rank(&fabric, &RankOptions::default());
    let lids = assign_lids(&fabric, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: &fabric,
        ranking: &ranking,
        lids: &lids,
    };
    let (r, c) = route_all_checked(&ctx, kind, None).unwrap();
    assert!(c.valid, "{c:?}");
    let subnet = snapshot(&fabric, &lids, &r.lfts);
    Routed {
        fabric,
        lids,
        lfts: r.lfts,
        subnet,
    }
}

/// The PathRecords of the pair (end port `s`, end port `d`) asked by GIDs, with NumbPath `n`
/// (`None`: every LID pair).
fn paths(r: &Routed, s: u32, d: u32, n: Option<u8>) -> Vec<Pr> {
    let g = |i: u32| r.fabric.end_port(EndPortId(i)).port_guid;
    let (mut t, mut m) = Template {
        sgid: Some(g(s)),
        dgid: Some(g(d)),
        ..Template::default()
    }
    .image();
    if let Some(n) = n {
        t[49] = n;
        m |= PR_MASK_NUMB_PATH;
    }
    let a = ask(&r.subnet, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t));
    assert_eq!(a.header.status, 0);
    records(&a)
}

#[test]
fn numb_path_answers_the_layer_lids_then_the_escape() {
    for (lmc, spec) in [(2u8, "PGFT(2;4,4;1,2;1,1)"), (3, "PGFT(2;4,4;1,2;1,1)")] {
        let r = routed_lmc(generate_str(spec, None).unwrap(), lmc, EngineKind::Dmodc);
        let layers = (1u16 << lmc) - 1;
        for (s, d) in [(0u32, 9u32), (3, 14), (5, 6)] {
            let (sl, dl) = (
                r.lids.base_lid(EndPortId(s)) as u16,
                r.lids.base_lid(EndPortId(d)) as u16,
            );
            let got = paths(&r, s, d, Some(layers as u8));
            let want: Vec<_> = (0..layers).map(|o| (sl + o, dl + o, 0, 0)).collect();
            assert_eq!(
                got.iter()
                    .map(|p| (p.slid, p.dlid, p.sl, p.preference))
                    .collect::<Vec<_>>(),
                want,
                "LMC {lmc} {s}->{d}"
            );
            // Every LID pair: (2^LMC)² records, the escape DLID (last offset) on the escape SL.
            let all = paths(&r, s, d, None);
            assert_eq!(all.len(), 1 << (2 * lmc));
            for p in &all {
                let escape = p.dlid == dl + layers;
                assert_eq!(p.sl, if escape { ESCAPE_SL } else { 0 }, "{p:?}");
            }
            // One more than the layers: the escape pair (equal offsets) comes next.
            let next = paths(&r, s, d, Some(layers as u8 + 1));
            assert_eq!(
                next.last().map(|p| (p.slid, p.dlid, p.sl)),
                Some((sl + layers, dl + layers, ESCAPE_SL))
            );
        }
    }
}

#[test]
fn layered_slim_fly_paths_differ_per_layer_lid() {
    let f = generate_str("SLIMFLY(5;4)", None).unwrap();
    let r = routed_lmc(f, 2, EngineKind::Layered { k: 3, seed: 0 });
    let mut longer = 0;
    let n = r.fabric.num_end_ports() as u32;
    for s in (0..n).step_by(7) {
        for d in (0..n).step_by(11).filter(|&d| d != s) {
            let got = paths(&r, s, d, Some(3));
            let dl = r.lids.base_lid(EndPortId(d)) as u16;
            assert_eq!(got.iter().map(|p| p.dlid).collect::<Vec<_>>(), vec![dl, dl + 1, dl + 2]);
            assert!(got.iter().all(|p| p.sl == 0));
            let src = r
                .subnet
                .port_index_by_guid(r.fabric.end_port(EndPortId(s)).port_guid)
                .unwrap();
            let hops: Vec<_> = (0..3).map(|o| walk(&r.subnet, src, dl + o).unwrap().links).collect();
            // Layer 0 is minimal: no layer is shorter.
            assert!(hops[1] >= hops[0] && hops[2] >= hops[0], "{s}->{d}: {hops:?}");
            longer += usize::from(hops[1] > hops[0]) + usize::from(hops[2] > hops[0]);
        }
    }
    assert!(longer > 0, "the almost-minimal layers take longer paths somewhere");
}
