//! Property tests: on random fabrics with random (partly corrupted) LFTs, LIDs and faults,
//! [`MockFabric::verify_all_pairs`] (one walk per ingress switch and destination, union-find
//! connectivity) agrees with a naive check that traces every pair with [`MockFabric::trace`] and
//! takes liveness and connectivity from the fabric model of [`SouthboundDriver::discover`].

use std::collections::VecDeque;

use super::*;
use fabric_routing::LidPlan;
use fabric_southbound::{LftBlockWrite, SouthboundDriver};
use fabric_topology::{EndPortId, FabricBuilder, NodeType};
use proptest::prelude::{any, prop_assert, prop_assert_eq, prop_oneof, proptest, Just, ProptestConfig};
use rand::{Rng, SeedableRng};

/// A random fabric: `n_sw` switches of 4..=8 ports, random cables (self-loops and parallel
/// cables included), `n_ep` end ports on random free ports.
fn random_fabric(rng: &mut ChaCha8Rng, n_sw: usize, n_ep: usize) -> Fabric {
    let mut b = FabricBuilder::new();
    let mut free: Vec<(SwitchId, PortNum)> = Vec::new();
    for i in 0..n_sw {
        let nports: PortNum = rng.gen_range(4..=8);
        let id = b.add_switch(0x1000 + i as u64, format!("sw{i}"), nports).unwrap();
        free.extend((1..=nports).map(|p| (id, p)));
    }
    let take = |rng: &mut ChaCha8Rng, free: &mut Vec<(SwitchId, PortNum)>| {
        let i = rng.gen_range(0..free.len());
        free.swap_remove(i)
    };
    for e in 0..n_ep {
        if free.is_empty() {
            break;
        }
        let ep = b.add_end_port(
            0x10_0000 + e as u64,
            0x20_0000 + e as u64,
            format!("n{e}"),
            1,
            1,
            NodeType::Compute,
        );
        let (sw, p) = take(rng, &mut free);
        b.connect_end_port(ep.unwrap(), sw, p).unwrap();
    }
    let cables = rng.gen_range(0..=n_sw * 2);
    for _ in 0..cables {
        if free.len() < 2 {
            break;
        }
        let (a, pa) = take(rng, &mut free);
        let (c, pc) = take(rng, &mut free);
        b.connect_switches(a, pa, c, pc).unwrap();
    }
    b.build()
}

/// Min-hop routes over all cables to every assigned LID, then a share of entries overwritten
/// with random ports (including 0, uncabled, nonexistent and 255).
fn random_lfts(rng: &mut ChaCha8Rng, f: &Fabric, plan: &LidPlan, corrupt: f64) -> Vec<LftBlockWrite> {
    let top = plan.top() as usize;
    let mut rows = vec![vec![NO_ROUTE; (top + 1).div_ceil(BLOCK_SIZE) * BLOCK_SIZE]; f.num_switches()];
    let mut dests: Vec<(Lid, SwitchId, PortNum)> = Vec::new();
    for ep in f.end_port_ids() {
        if let (Some((sw, p)), base) = (f.end_port(ep).attach, plan.base_lid(ep)) {
            if base == 0 {
                continue;
            }
            for lid in base..base + (1 << plan.lmc) {
                dests.push((lid, sw, p));
            }
        }
    }
    for sw in f.switch_ids().filter(|&sw| plan.switch_lid(sw) != 0) {
        dests.push((plan.switch_lid(sw), sw, 0));
    }
    for (lid, dsw, dport) in dests {
        rows[dsw.idx()][lid as usize] = dport;
        let mut seen = vec![false; f.num_switches()];
        seen[dsw.idx()] = true;
        let mut q = VecDeque::from([dsw]);
        while let Some(s) = q.pop_front() {
            for (_, p) in f.switch(s).external_ports() {
                if let Remote::Switch { sw: r, port: rp } = p.remote {
                    if !seen[r.idx()] {
                        seen[r.idx()] = true;
                        rows[r.idx()][lid as usize] = rp;
                        q.push_back(r);
                    }
                }
            }
        }
    }
    for (i, row) in rows.iter_mut().enumerate() {
        let nports = f.switch(SwitchId(i as u32)).nports;
        for e in row.iter_mut() {
            if rng.gen_bool(corrupt) {
                *e = match rng.gen_range(0..4) {
                    0 => NO_ROUTE,
                    1 => 0,
                    _ => rng.gen_range(1..=nports + 1),
                };
            }
        }
    }
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for (b, chunk) in row.chunks(BLOCK_SIZE).enumerate() {
            let mut entries = [NO_ROUTE; BLOCK_SIZE];
            entries.copy_from_slice(chunk);
            out.push(LftBlockWrite {
                switch: f.switch(SwitchId(i as u32)).guid,
                block: b as u32,
                entries,
            });
        }
    }
    out
}

/// Switches reachable from `from` over live links of the model.
fn reachable(f: &Fabric, from: SwitchId) -> Vec<bool> {
    let mut seen = vec![false; f.num_switches()];
    seen[from.idx()] = true;
    let mut q = VecDeque::from([from]);
    while let Some(s) = q.pop_front() {
        for pn in 1..=f.switch(s).nports {
            if let Some((r, _)) = f.switch_link_live(s, pn) {
                if !seen[r.idx()] {
                    seen[r.idx()] = true;
                    q.push_back(r);
                }
            }
        }
    }
    seen
}

/// Sets one random cable (of a random switch), switch or end port of `f` down or `up`.
async fn random_change(m: &MockFabric, f: &Fabric, rng: &mut ChaCha8Rng, up: bool) {
    match rng.gen_range(0..3) {
        0 => {
            let s = f.switch(SwitchId(rng.gen_range(0..f.num_switches() as u32)));
            let cabled: Vec<_> = s.external_ports().filter(|(_, p)| p.remote != Remote::None).collect();
            if !cabled.is_empty() {
                let (pn, _) = cabled[rng.gen_range(0..cabled.len())];
                m.set_port_state(s.guid, pn, up).await.unwrap();
            }
        }
        1 => {
            let s = f.switch(SwitchId(rng.gen_range(0..f.num_switches() as u32)));
            m.set_switch_state(s.guid, up).await.unwrap();
        }
        _ if f.num_end_ports() > 0 => {
            let e = f.end_port(EndPortId(rng.gen_range(0..f.num_end_ports() as u32)));
            m.set_end_port_state(e.port_guid, up).await.unwrap();
        }
        _ => {}
    }
}

fn naive(m: &MockFabric, f: &Fabric, plan: &LidPlan, escape: bool) -> ReachReport {
    let mut r = ReachReport::default();
    let live: Vec<EndPortId> = f.end_port_ids().filter(|&e| f.end_port_live(e)).collect();
    for &s in &live {
        let (ssw, _) = f.end_port(s).attach.unwrap();
        let reach = reachable(f, ssw);
        for &d in &live {
            if s == d {
                continue;
            }
            let (dsw, _) = f.end_port(d).attach.unwrap();
            if !reach[dsw.idx()] {
                r.disconnected += 1;
                continue;
            }
            r.pairs_checked += 1;
            let dg = f.end_port(d).port_guid;
            let base = plan.base_lid(d);
            let res = if base == 0 {
                Err(TraceError::NoLid(dg))
            } else if escape && plan.lmc == 0 {
                Err(TraceError::NoEscapeLid(dg))
            } else {
                m.trace(f.end_port(s).port_guid, base + Lid::from(escape)).map(|_| ())
            };
            if let Err(e) = res {
                r.unreachable_count += 1;
                if r.unreachable.len() < REACH_REPORT_MAX_LISTED {
                    r.unreachable.push((f.end_port(s).port_guid, dg, e.to_string()));
                }
            }
        }
    }
    r
}

fn naive_switch_lids(m: &MockFabric, f: &Fabric, plan: &LidPlan) -> ReachReport {
    let mut r = ReachReport::default();
    for s in f.end_port_ids().filter(|&e| f.end_port_live(e)) {
        let (ssw, _) = f.end_port(s).attach.unwrap();
        let reach = reachable(f, ssw);
        for d in f.switch_ids().filter(|&d| f.switch(d).up) {
            if !reach[d.idx()] {
                r.disconnected += 1;
                continue;
            }
            r.pairs_checked += 1;
            let dg = f.switch(d).guid;
            let res = match plan.switch_lid(d) {
                0 => Err(TraceError::NoSwitchLid(dg)),
                lid => m.trace(f.end_port(s).port_guid, lid).map(|_| ()),
            };
            if let Err(e) = res {
                r.unreachable_count += 1;
                if r.unreachable.len() < REACH_REPORT_MAX_LISTED {
                    r.unreachable.push((f.end_port(s).port_guid, dg, e.to_string()));
                }
            }
        }
    }
    r
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn verify_all_pairs_agrees_with_naive_traces(
        seed in any::<u64>(),
        n_sw in 1usize..7,
        n_ep in 0usize..14,
        lmc in 0u8..2,
        corrupt in prop_oneof![Just(0.0), 0.0f64..0.3],
        faults in 0usize..6,
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let f = random_fabric(&mut rng, n_sw, n_ep);
        // LIDs: end ports first (aligned), some left unassigned, then switches.
        let span: Lid = 1 << lmc;
        let mut next: Lid = span.max(2);
        let mut end_port_base = Vec::new();
        for _ in f.end_port_ids() {
            if rng.gen_bool(0.1) {
                end_port_base.push(0);
            } else {
                end_port_base.push(next);
                next += span;
            }
        }
let switch_lid: Vec<Lid> = f.switch_ids().map(|_| if rng.gen_bool(0.1) { 0 } else { next += 1; next }).collect();
        let plan = LidPlan { lmc, max_lid: IB_MAX_UNICAST_LID, switch_lid, end_port_base };
        let blocks = random_lfts(&mut rng, &f, &plan, corrupt);

        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let m = MockFabric::new(f.clone());
        rt.block_on(async {
            m.configure_lids(&f, &plan).await.unwrap();
            m.write_lft_blocks(&blocks).await.unwrap();
            for _ in 0..faults {
                random_change(&m, &f, &mut rng, false).await;
            }
        });
        let now = rt.block_on(m.discover()).unwrap();
        for escape in [false, true] {
            let fast = m.verify_all_pairs(escape);
            let slow = naive(&m, &now, &plan, escape);
            prop_assert_eq!(&fast, &slow, "escape = {}", escape);
        }
        prop_assert_eq!(m.verify_switch_lids(), naive_switch_lids(&m, &now, &plan));
        // Uncorrupted min-hop routes on an unfaulted fabric reach every connected pair that has LIDs.
        if corrupt == 0.0 && faults == 0 {
            let r = m.verify_all_pairs(false);
            prop_assert!(r.unreachable.iter().all(|(_, _, why)| why.contains("has no LID")), "{:?}", r.unreachable);
            let r = m.verify_switch_lids();
            prop_assert!(r.unreachable.iter().all(|(_, _, why)| why.contains("has no LID")), "{:?}", r.unreachable);
        }
    }

    /// The live state read without a model ([`MockFabric::port_live`], [`MockFabric::switch_is_up`])
    /// is the model's: after random downs and ups of cables, switches and end ports, on
    /// fabrics with self-loops, parallel cables and initial faults.
    #[test]
    fn port_live_agrees_with_the_discovered_model(
        seed in any::<u64>(),
        n_sw in 1usize..7,
        n_ep in 0usize..14,
        initial_faults in 0usize..3,
        changes in 0usize..12,
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut f = random_fabric(&mut rng, n_sw, n_ep);
        for _ in 0..initial_faults {
            let s = f.switch(SwitchId(rng.gen_range(0..f.num_switches() as u32)));
            let cabled: Vec<_> = s.external_ports().filter(|(_, p)| p.remote != Remote::None).map(|(pn, _)| pn).collect();
            if let Some(&pn) = cabled.first() {
                f = f.apply(&[FabricEvent::LinkDown { switch: s.guid, port: pn }]).unwrap();
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let m = MockFabric::new(f.clone());
        for step in 0..=changes {
            if step > 0 {
                let up = rng.gen_bool(0.4);
                rt.block_on(random_change(&m, &f, &mut rng, up));
            }
            let now = rt.block_on(m.discover()).unwrap();
            for sid in now.switch_ids() {
                let s = now.switch(sid);
                prop_assert_eq!(m.switch_is_up(sid), s.up, "switch {}", sid.0);
                for pn in 0..=s.nports {
                    let model = match s.ports[pn as usize].remote {
                        Remote::None => false,
                        Remote::Switch { .. } => now.switch_link_live(sid, pn).is_some(),
                        Remote::EndPort(ep) => now.end_port_live(ep),
                    };
                    prop_assert_eq!(m.port_live(sid, pn), model, "switch {} port {} step {}", sid.0, pn, step);
                }
                prop_assert!(!m.port_live(sid, s.nports.saturating_add(1)) || s.nports == PortNum::MAX);
            }
        }
    }
}
