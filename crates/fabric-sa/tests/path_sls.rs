//! Per-path SLs (issue 19: a routing layered over several VLs, seed 003 §5.2): PathRecords
//! take the SL of the route from the path's first switch (the source CA's neighbour) to the
//! DLID from `Subnet::path_sls`; escape LIDs keep the escape SL; the SL component mask selects
//! on it; `SaService::set_path_sls` reaches the current and later snapshots.

mod path_support;

use std::sync::Arc;
use std::time::SystemTime;

use fabric_sa::registry::Registry;
use fabric_sa::wire::{attr, METHOD_GET_TABLE};
use fabric_sa::{PathSls, Requester, SaService};
use fabric_topology::gen::generate_str;
use fabric_topology::{EndPortId, Fabric};
use path_support::*;
use proptest::prelude::*;

const PR_MASK_SL: u64 = 1 << 15;

/// SLs from a seed: SL of (switch row r, LID l) = hash(seed, r, l) mod 16.
fn sls(f: &Fabric, row_len: usize, seed: u64) -> PathSls {
    let ns = f.num_switches();
    let sl = (0..ns * row_len)
        .map(|i| ((i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60) as u8)
        .collect();
    PathSls {
        row_of_switch: f.switch_ids().map(|s| (f.switch(s).guid, s.0)).collect(),
        row_len,
        sl,
    }
}

/// The expected SL of the path from end port `a` to `dlid`: the table's entry at the switch
/// `a` is cabled to (from the model, not from the snapshot).
fn expected(f: &Fabric, p: &PathSls, a: EndPortId, dlid: u16) -> u8 {
    let sw = f.end_port(a).attach.expect("cabled").0;
    p.sl[sw.idx() * p.row_len + dlid as usize]
}

fn table(r: &Routed, sg: u64, dg: u64, sl: Option<u8>) -> Vec<Pr> {
    let (mut t, mut m) = Template {
        sgid: Some(sg),
        dgid: Some(dg),
        ..Template::default()
    }
    .image();
    if let Some(v) = sl {
        t[53] = v;
        m |= PR_MASK_SL;
    }
    records(&ask(&r.subnet, &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn path_records_carry_the_sl_of_the_first_switchs_route(seed in any::<u64>(), a in 0u32..24, b in 0u32..24) {
        let mut r = routed(generate_str("SLIMFLY(3;2)", None).unwrap());
        let n = r.fabric.num_end_ports() as u32;
        let (a, b) = (EndPortId(a % n), EndPortId(b % n));
        let p = sls(&r.fabric, r.lfts.row_len(), seed);
        r.subnet.path_sls = Some(Arc::new(p.clone()));
        let (sg, dg) = (r.fabric.end_port(a).port_guid, r.fabric.end_port(b).port_guid);
        let recs = table(&r, sg, dg, None);
        prop_assert_eq!(recs.len(), 4);
        let escape = r.lids.escape_lid(b).unwrap() as u16;
        for pr in &recs {
            let want = if pr.dlid == escape { ESCAPE_SL } else { expected(&r.fabric, &p, a, pr.dlid) };
            prop_assert_eq!(pr.sl, want, "{:?}", pr);
        }
        // The SL in the mask selects exactly the records with that SL.
        for v in 0..16u8 {
            let sel = table(&r, sg, dg, Some(v));
            let want: Vec<_> = recs.iter().filter(|p| p.sl == v).copied().collect();
            prop_assert_eq!(sel, want);
        }
    }
}

#[test]
fn without_path_sls_base_paths_are_on_sl_0_and_the_service_sets_them() {
    let r = routed(generate_str("SLIMFLY(3;2)", None).unwrap());
    let (a, b) = (EndPortId(0), EndPortId(7));
    let (sg, dg) = (r.fabric.end_port(a).port_guid, r.fabric.end_port(b).port_guid);
    let base = r.lids.base_lid(b) as u16;
    assert!(table(&r, sg, dg, None)
        .iter()
        .all(|p| p.sl == if p.dlid == base { 0 } else { ESCAPE_SL }));

    let sa = SaService::new(Registry::default(), None);
    sa.set_serving(true);
    sa.publish(r.subnet.clone());
    // Every base route of a's switch on SL 5.
    let mut p = sls(&r.fabric, r.lfts.row_len(), 0);
    p.sl.iter_mut().for_each(|x| *x = 5);
    sa.set_path_sls(Some(Arc::new(p.clone())));
    assert_eq!(sa.subnet().path_sls.as_deref(), Some(&p), "the current snapshot");
    // A snapshot published without SLs (a driver's rebuild) gets them; with None cleared.
    sa.publish(r.subnet.clone());
    assert_eq!(sa.subnet().path_sls.as_deref(), Some(&p), "a later snapshot");
    let (t, m) = Template {
        sgid: Some(sg),
        dgid: Some(dg),
        ..Template::default()
    }
    .image();
    let from = Requester::default();
    let ans = sa
        .handle(
            &mad(METHOD_GET_TABLE, attr::PATH_RECORD, m, &t),
            &from,
            SystemTime::now(),
        )
        .unwrap();
    let got: Vec<_> = records(&ans).iter().map(|p| (p.dlid, p.sl)).collect();
    assert!(got.contains(&(base, 5)), "{got:?}");
    assert!(got.contains(&(base + 1, ESCAPE_SL)), "{got:?}");
    sa.set_path_sls(None);
    assert!(sa.subnet().path_sls.is_none());
    sa.publish(r.subnet.clone());
    assert!(sa.subnet().path_sls.is_none());
}
