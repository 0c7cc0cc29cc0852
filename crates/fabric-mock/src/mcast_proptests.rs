//! Property tests of the multicast data plane: on random (degraded, faulted) k-ary n-trees, a
//! multicast tree built by the test itself (BFS from a random switch over the live links,
//! pruned to the members) and installed as MFT blocks delivers every receiver's packet to every
//! other reachable receiver exactly once; one extra live cable between two tree switches makes
//! the flood report [`TraceError::McastLoop`]. Also: random MFT and P_Key blocks read back as
//! written.

use std::collections::{HashMap, VecDeque};

use super::*;
use fabric_southbound::{MftBlockWrite, PkeyBlockWrite, PkeyPort, SouthboundDriver, MFT_BLOCK_SIZE, MLID_BASE};
use fabric_topology::gen::Degrade;
use fabric_topology::EndPortId;
use proptest::prelude::{any, prop_assert, prop_assert_eq, prop_assume, proptest, ProptestConfig};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// The MFT blocks setting `mask[sw]` (a list of ports) for MLID `mlid` on every switch.
fn mft_writes(f: &Fabric, mlid: Lid, masks: &HashMap<SwitchId, Vec<PortNum>>) -> Vec<MftBlockWrite> {
    let slot = (mlid - MLID_BASE) as usize;
    let mut out = Vec::new();
    for (&sw, ports) in masks {
        let mut by_pos: HashMap<usize, u16> = HashMap::new();
        for &p in ports {
            *by_pos.entry(p as usize / 16).or_default() |= 1 << (p % 16);
        }
        for (pos, bits) in by_pos {
            let mut entries = [0u16; MFT_BLOCK_SIZE];
            entries[slot % MFT_BLOCK_SIZE] = bits;
            out.push(MftBlockWrite {
                switch: f.switch(sw).guid,
                block: (slot / MFT_BLOCK_SIZE) as u32,
                position: pos as u8,
                entries,
            });
        }
    }
    out
}

/// Live switch-to-switch cable of the discovered fabric: `(switch, port, remote, remote port)`.
fn live_cables(now: &Fabric) -> Vec<(SwitchId, PortNum, SwitchId, PortNum)> {
    let mut out = Vec::new();
    for s in now.switch_ids().filter(|&s| now.switch(s).up) {
        for (p, port) in now.switch(s).external_ports() {
            if let Remote::Switch { sw: r, port: rp } = port.remote {
                if r != s && now.switch(r).up && port.state == LinkState::Up {
                    out.push((s, p, r, rp));
                }
            }
        }
    }
    out
}

/// Joins switch `sw` of the BFS tree to the pruned tree: sets the bits of the tree cables from
/// it up to the first switch already `needed` (or the root).
fn join_tree(
    sw: SwitchId,
    parent: &[Option<(SwitchId, PortNum, PortNum)>],
    needed: &mut [bool],
    masks: &mut HashMap<SwitchId, Vec<PortNum>>,
) {
    let mut cur = sw;
    while !needed[cur.idx()] {
        needed[cur.idx()] = true;
        let Some((up, up_port, my_port)) = parent[cur.idx()] else {
            break;
        };
        masks.entry(cur).or_default().push(my_port);
        masks.entry(up).or_default().push(up_port);
        cur = up;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn a_tree_mft_reaches_every_receiver_exactly_once(
        seed in any::<u64>(),
        k in 2usize..5,
        levels in 2usize..4,
        remove_links in 0usize..4,
        faults in 0usize..5,
        n_members in 2usize..12,
        slot in 0u32..1024,
    ) {
        let deg = Degrade { remove_links, remove_switches: 0, seed };
        let m = MockFabric::from_generator(&format!("KARY({k},{levels})"), Some(&deg));
        prop_assume!(m.is_ok());
        let m = m.unwrap();
        let f = m.cabling().clone();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // Faults: switch-to-switch links down, end ports down.
        rt.block_on(async {
            for _ in 0..faults {
                if rng.gen_bool(0.6) {
                    let s = f.switch(SwitchId(rng.gen_range(0..f.num_switches() as u32)));
                    let cables: Vec<_> = s.external_ports().filter(|(_, p)| matches!(p.remote, Remote::Switch { .. })).collect();
                    if let Some(&(pn, _)) = cables.choose(&mut rng) {
                        m.set_port_state(s.guid, pn, false).await.unwrap();
                    }
                } else {
                    let e = f.end_port(EndPortId(rng.gen_range(0..f.num_end_ports() as u32)));
                    m.set_end_port_state(e.port_guid, false).await.unwrap();
                }
            }
        });
        let now = rt.block_on(m.discover()).unwrap();
        let mut members: Vec<EndPortId> = now.end_port_ids().collect();
        members.shuffle(&mut rng);
        members.truncate(n_members);
        members.sort();

        // BFS tree from a random root over live cables: parent (switch, its port, our port).
        let root = SwitchId(rng.gen_range(0..now.num_switches() as u32));
        let cables = live_cables(&now);
        let mut parent: Vec<Option<(SwitchId, PortNum, PortNum)>> = vec![None; now.num_switches()];
        let mut in_tree = vec![false; now.num_switches()];
        in_tree[root.idx()] = true;
        let mut q = VecDeque::from([root]);
        let mut tree_edges = std::collections::HashSet::new();
        while let Some(s) = q.pop_front() {
            for &(_, p, r, rp) in cables.iter().filter(|c| c.0 == s) {
                if !in_tree[r.idx()] {
                    in_tree[r.idx()] = true;
                    parent[r.idx()] = Some((s, p, rp));
                    tree_edges.insert((s, p));
                    tree_edges.insert((r, rp));
                    q.push_back(r);
                }
            }
        }
        // Prune to the members' switches and their ancestors; set the bits.
        let mut masks: HashMap<SwitchId, Vec<PortNum>> = HashMap::new();
        let mut needed = vec![false; now.num_switches()];
        for &e in &members {
            let Some((sw, p)) = now.end_port(e).attach else { continue };
            if !in_tree[sw.idx()] {
                continue;
            }
            masks.entry(sw).or_default().push(p);
            join_tree(sw, &parent, &mut needed, &mut masks);
        }
        let mlid = MLID_BASE + slot;
        rt.block_on(m.write_mft_blocks(&mft_writes(&now, mlid, &masks))).unwrap();

        // Receivers: live members on tree switches (their end port links are never faulted).
        let receives = |e: EndPortId| {
            now.end_port(e).up && now.end_port(e).attach.is_some_and(|(sw, _)| in_tree[sw.idx()])
        };
        let receivers: Vec<EndPortId> = members.iter().copied().filter(|&e| receives(e)).collect();
        for &src in &members {
            let guid = now.end_port(src).port_guid;
            let got = m.flood_multicast(guid, mlid);
            if !now.end_port(src).up {
                prop_assert_eq!(got, Err(TraceError::SourceDown(guid)));
                continue;
            }
            let got = got.unwrap();
            let want: Vec<(Guid, u32)> = if receives(src) {
                receivers.iter().filter(|&&r| r != src).map(|&r| (now.end_port(r).port_guid, 1)).collect()
            } else {
                Vec::new()
            };
            prop_assert_eq!(&got.received, &want, "flood from {:#x}", guid);
            prop_assert!(got.switch_visits <= now.num_switches(), "a tree visits each switch at most once");
        }

        // One more live cable between two switches of the BFS tree (both joined to the pruned
        // tree) closes a cycle: the flood circulates.
        let extra = cables
            .iter()
            .find(|&&(s, p, r, _)| s < r && in_tree[s.idx()] && in_tree[r.idx()] && !tree_edges.contains(&(s, p)));
        if let (Some(&(s, p, r, rp)), Some(&src)) = (extra, receivers.first()) {
            join_tree(s, &parent, &mut needed, &mut masks);
            join_tree(r, &parent, &mut needed, &mut masks);
            masks.entry(s).or_default().push(p);
            masks.entry(r).or_default().push(rp);
            rt.block_on(m.write_mft_blocks(&mft_writes(&now, mlid, &masks))).unwrap();
            let got = m.flood_multicast(now.end_port(src).port_guid, mlid);
            prop_assert!(matches!(got, Err(TraceError::McastLoop { lid, .. }) if lid == mlid), "{:?}", got);
        }
    }

    #[test]
    fn random_table_blocks_read_back_as_written(seed in any::<u64>(), n in 1usize..40) {
        let m = MockFabric::from_generator("KARY(4,2)", None).unwrap();
        let f = m.cabling().clone();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut mft_want: HashMap<(Guid, u32, u8), [u16; 32]> = HashMap::new();
        let mut pkey_want: HashMap<(PkeyPort, u16), [u16; 32]> = HashMap::new();
        for _ in 0..n {
            let s = f.switch(SwitchId(rng.gen_range(0..f.num_switches() as u32)));
            let (block, position) = (rng.gen_range(0..32u32), rng.gen_range(0..=s.nports / 16));
            let limit = if position == s.nports / 16 { u32::from(s.nports % 16) + 1 } else { 16 };
            let entries: [u16; 32] = std::array::from_fn(|_| rng.gen::<u16>() & ((1u32 << limit) - 1) as u16);
            rt.block_on(m.write_mft_blocks(&[MftBlockWrite { switch: s.guid, block, position, entries }])).unwrap();
            mft_want.insert((s.guid, block, position), entries);
            let port = if rng.gen_bool(0.5) {
                PkeyPort::EndPort(f.end_port(EndPortId(rng.gen_range(0..f.num_end_ports() as u32))).port_guid)
            } else {
                PkeyPort::SwitchPort(s.guid, rng.gen_range(1..=s.nports))
            };
            let block = rng.gen_range(0..4u16);
            let entries: [u16; 32] = std::array::from_fn(|_| rng.gen());
            rt.block_on(m.write_pkey_blocks(&[PkeyBlockWrite { port, block, entries }])).unwrap();
            pkey_want.insert((port, block), entries);
        }
        for ((sw, block, position), entries) in mft_want {
            prop_assert_eq!(rt.block_on(m.read_mft_block(sw, block, position)).unwrap(), entries);
        }
        for ((port, block), entries) in pkey_want {
            prop_assert_eq!(rt.block_on(m.read_pkey_block(port, block)).unwrap(), entries);
        }
    }
}
