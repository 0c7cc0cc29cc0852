//! Unit tests of PQFT's pieces: eq. 12, the shape checks, the tolerant recognition, and that
//! Alg. 1 keeps the closed form on an intact fabric.

use fabric_topology::gen::{generate, PgftSpec};
use fabric_topology::{FabricBuilder, PortNum, Remote, SwitchId};

use super::closed::Closed;
use super::layout::qft_layout;
use super::*;
use crate::testutil::{degrade, Routable};

fn spec(s: &str) -> PgftSpec {
    s.parse().unwrap()
}

/// Eq. 12 as the paper writes it, `Π_{i≤l} w_i p_i / p_{i-2}` (exact: each partial product is
/// an integer for these specs), against the simplified `W_l · p_{l-1} · p_l` of [`Closed`].
#[test]
fn eq_12_step_sizes() {
    for s in [
        "QFT(4;18,3,18,36;1,3,18,18;1,6,1,1)",
        "QFT(3;18,6,36;1,6,18;1,3,1)",
        "QFT(3;4,2,4;1,2,4;1,2,1)",
    ] {
        let sp = spec(s);
        let c = Closed::new(&sp).unwrap();
        let p = |i: i64| if i >= 1 { u64::from(sp.p[i as usize - 1]) } else { 1 };
        let (mut num, mut den) = (1u64, 1u64);
        for l in 1..=sp.h {
            num *= u64::from(sp.w[l - 1]) * p(l as i64);
            den *= p(l as i64 - 2);
            assert_eq!(num % den, 0, "{s} l={l}");
            assert_eq!(c.rp[l], num / den, "{s} R'_{l}");
        }
    }
    // The Table I QFT: R'_1..4 = 1, w2 p2 = 18, w2 w3 p2 = 324, w2 w3 w4 = 972.
    let sp = spec("QFT(4;18,3,18,36;1,3,18,18;1,6,1,1)");
    assert_eq!(Closed::new(&sp).unwrap().rp, [1, 1, 18, 324, 972]);
}

#[test]
fn shapes_outside_the_paper_are_refused_with_a_reason() {
    let pgft = spec("PGFT(3;4,2,4;1,2,2;1,2,1)");
    let e = Closed::new(&pgft).err().unwrap();
    assert!(e.contains("parallel cables"), "{e}");
    assert!(Closed::new(&spec("XGFT(3;4,4,4;1,4,4)")).is_ok());
    let two = spec("QFT(4;4,2,4,4;1,2,4,4;1,2,2,1)");
    assert!(Closed::new(&two).err().unwrap().contains("single level"));
    let top = spec("QFT(3;4,4,4;1,4,4;1,1,2)");
    assert!(Closed::new(&top).err().unwrap().contains("top level"));
    let div = spec("QFT(4;4,2,4,3;1,2,4,3;1,2,1,1)");
    assert!(Closed::new(&div).err().unwrap().contains("divisible"));
}

/// On a complete QFT the fault-resilient path (Alg. 1 with costs) writes exactly the closed
/// form: eq. 10 is downward reachability and every closed-form port leads on.
#[test]
fn alg1_keeps_the_closed_form_on_a_complete_qft() {
    for s in [
        "QFT(3;4,2,4;1,2,4;1,2,1)",
        "QFT(4;4,2,4,4;1,2,4,4;1,2,1,1)",
        "QFT(3;4,2,4;1,2,2;1,2,1)",
    ] {
        let r = Routable::new(generate(&spec(s)).unwrap().fabric);
        let ctx = r.ctx();
        let f = &r.fabric;
        let mut lay = qft_layout(f, &[]).unwrap();
        assert!(lay.complete);
        let sp = lay.spec.clone();
        let closed = Closed::new(&sp).unwrap();
        let level: Vec<Option<u32>> = lay.addr.iter().map(|a| Some(a.level)).collect();
        let o = Oriented::new(f, &level);
        let top = r.lids.top();
        let mut pure = Lfts::new(f.num_switches(), top);
        route_qft(f, &ctx, LidSet::Base, &lay, &closed, &o, &mut pure);
        lay.complete = false;
        let mut alg1 = Lfts::new(f.num_switches(), top);
        route_qft(f, &ctx, LidSet::Base, &lay, &closed, &o, &mut alg1);
        assert!(pure.as_bytes() == alg1.as_bytes(), "{s}");
    }
}

#[test]
fn degraded_qfts_are_recognised_and_miscabled_ones_refused() {
    let g = generate(&spec("QFT(3;4,2,4;1,2,4;1,2,1)")).unwrap();
    let d = degrade(&g.fabric, 10, 2, 7);
    let lay = qft_layout(&d, &[]).unwrap();
    assert!(!lay.complete);
    assert_eq!(lay.spec, g.layout.spec);
    // Swap the far ends of two up cables of leaf 0: the names still say QFT, the ports do not
    // follow eq. 8 any more.
    let f = &g.fabric;
    let leaf = SwitchId(0);
    let ups: Vec<(PortNum, SwitchId, PortNum)> = f
        .switch(leaf)
        .external_ports()
        .filter_map(|(pn, p)| match p.remote {
            Remote::Switch { sw, port } => Some((pn, sw, port)),
            _ => None,
        })
        .collect();
    let (a, b) = (ups[0], ups[1]);
    let mut fb = FabricBuilder::new();
    for s in f.switches() {
        fb.add_switch(s.guid, s.desc.clone(), s.nports).unwrap();
    }
    for e in f.end_ports() {
        let ep = fb
            .add_end_port(
                e.port_guid,
                e.node_guid,
                e.desc.clone(),
                e.port_num,
                e.node_ports,
                e.node_type,
            )
            .unwrap();
        let (sw, port) = e.attach.unwrap();
        fb.connect_end_port(ep, sw, port).unwrap();
    }
    for s in f.switch_ids() {
        for (pn, p) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, port } = p.remote {
                if (s, pn) < (sw, port) {
                    let (sw, port) = match (s, pn) {
                        x if x == (leaf, a.0) => (b.1, b.2),
                        x if x == (leaf, b.0) => (a.1, a.2),
                        _ => (sw, port),
                    };
                    fb.connect_switches(s, pn, sw, port).unwrap();
                }
            }
        }
    }
    let bad = fb.build();
    let e = qft_layout(&bad, &[]).err().unwrap();
    assert!(e.contains("is not cabled as in"), "{e}");
    let r = Routable::new(bad);
    let mut lfts = Lfts::new(r.fabric.num_switches(), r.lids.top());
    match Pqft.route(&r.ctx(), LidSet::Base, &mut lfts) {
        Err(RoutingError::Unsupported { engine: "pqft", reason }) => assert!(reason.contains("not a quasi fat-tree")),
        other => panic!("{other:?}"),
    }
}
