//! The one-pass selection against a block-by-block reference, and the reused port sets against
//! a full scan, on random fault sequences.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::compute::{compute, ComputeInput};
use fabric_topology::{FabricEvent, Remote};

/// Block by block, every block of every switch (the selection before the one-pass version).
fn reference(
    physical: &Fabric,
    installed: &Lfts,
    new: &Lfts,
    dirty: &BTreeSet<(u32, u32)>,
    resync: &BTreeSet<u32>,
) -> (Vec<LftBlockDiff>, Vec<(u32, u32)>) {
    let empty = [NO_ROUTE; BLOCK_SIZE];
    let (mut writes, mut skipped) = (Vec::new(), Vec::new());
    for s in 0..new.num_switches() {
        let sw = SwitchId(s as u32);
        let up = s < physical.num_switches() && physical.switch(sw).up;
        for b in 0..new.num_blocks() {
            let nblk = new.block(sw, b);
            let old = if s < installed.num_switches() && b < installed.num_blocks() {
                installed.block(sw, b)
            } else {
                &empty[..]
            };
            if resync.contains(&(s as u32)) || nblk != old || dirty.contains(&(s as u32, b as u32)) {
                if up {
                    let mut entries = [0u8; BLOCK_SIZE];
                    entries.copy_from_slice(nblk);
                    writes.push(LftBlockDiff {
                        switch: sw,
                        block: b as u32,
                        entries,
                    });
                } else {
                    skipped.push((s as u32, b as u32));
                }
            }
        }
    }
    (writes, skipped)
}

/// Inter-switch links from their lower end.
fn links(f: &Fabric) -> Vec<(u64, u8)> {
    let mut v = Vec::new();
    for sw in f.switches() {
        for (port, p) in sw.external_ports() {
            if let Remote::Switch { sw: r, port: rp } = p.remote {
                if (sw.guid, port) < (f.switch(r).guid, rp) {
                    v.push((sw.guid, port));
                }
            }
        }
    }
    v
}

fn random_tables(rng: &mut ChaCha8Rng, switches: usize, top: u32) -> Lfts {
    let mut t = Lfts::new(switches, top);
    for s in 0..switches {
        for e in t.row_mut(SwitchId(s as u32)).iter_mut() {
            *e = rng.gen_range(0..6);
        }
    }
    t
}

#[test]
fn one_pass_selection_equals_the_block_by_block_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let physical = fabric_topology::gen::generate_str("PGFT(2;4,8;1,4;1,1)", None).unwrap();
    let n = physical.num_switches();
    for case in 0..200 {
        // Installed tables of another shape now and then (fewer switches or LIDs).
        let installed = match case % 5 {
            0 => Lfts::new(0, 0),
            1 => random_tables(&mut rng, n - 2, 100),
            _ => random_tables(&mut rng, n, 300),
        };
        let mut new = if installed.num_switches() == n && installed.row_len() > 64 {
            installed.clone()
        } else {
            random_tables(&mut rng, n, 300)
        };
        // A few changed entries on a few switches.
        for _ in 0..rng.gen_range(0..6) {
            let s = SwitchId(rng.gen_range(0..n) as u32);
            let lid = rng.gen_range(1..=300);
            new.set(s, lid, rng.gen_range(0..8));
        }
        let dirty: BTreeSet<(u32, u32)> = (0..rng.gen_range(0..4))
            .map(|_| (rng.gen_range(0..n as u32 + 1), rng.gen_range(0..6)))
            .collect();
        let resync: BTreeSet<u32> = (0..rng.gen_range(0..2)).map(|_| rng.gen_range(0..n as u32)).collect();
        let mut phys = physical.clone();
        if case % 3 == 0 {
            let dead = physical.switch(SwitchId(rng.gen_range(0..n) as u32)).guid;
            phys = phys.apply(&[FabricEvent::SwitchDown(dead)]).unwrap();
        }
        let want = reference(&phys, &installed, &new, &dirty, &resync);
        let full_scan = PortUse::of(&new);
        let installed_use = PortUse::of(&installed);
        for ports in [PortsWanted::No, PortsWanted::Scan, PortsWanted::Reuse(&installed_use)] {
            let got = select(&phys, &installed, &new, &dirty, &resync, ports);
            assert_eq!((&got.writes, &got.skipped), (&want.0, &want.1), "case {case}");
            match ports {
                PortsWanted::No => assert_eq!(got.ports_in_use, PortUse::default()),
                _ => assert_eq!(got.ports_in_use, full_scan, "case {case} {ports:?}"),
            }
        }
    }
}

/// Random link faults and repairs: every generation's writes are the diff of its tables with
/// the previous ones, and the port sets it reused from the previous generation equal a scan of
/// its own tables.
#[test]
fn reused_port_sets_equal_a_full_scan_over_random_fault_sequences() {
    for (seed, spec) in [(1, "PGFT(2;4,8;1,4;1,1)"), (2, "PGFT(3;4,4,4;1,4,2;1,1,1)")] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let fabric = Arc::new(fabric_topology::gen::generate_str(spec, None).unwrap());
        let all = links(&fabric);
        let mut first = ComputeInput::from_scratch(fabric.clone(), vec![]);
        first.ports_in_use = true;
        let mut prev = compute(first).unwrap();
        assert_eq!(*prev.ports_in_use, PortUse::of(&prev.lfts));
        let mut down: BTreeSet<(u64, u8)> = BTreeSet::new();
        let mut incremental = 0;
        for step in 0..25 {
            let l = all[rng.gen_range(0..all.len())];
            if !down.remove(&l) && down.len() < 4 {
                down.insert(l);
            }
            let exclusions = down
                .iter()
                .map(|&(switch, port)| FabricEvent::LinkDown { switch, port })
                .collect();
            let mut input = ComputeInput::from_scratch(fabric.clone(), exclusions);
            input.installed = prev.lfts.clone();
            input.installed_lids = Some(prev.lids.clone());
            input.previous_lids = prev.guid2lid.clone();
            input.lids_reusable = true;
            input.installed_ports_in_use = Some(prev.ports_in_use.clone());
            // Every other step routed incrementally from the previous generation (whose tables
            // are the installed ones: `select` skips the rows it did not re-fill).
            if step % 2 == 1 {
                input.previous_routing = prev.routing_state.clone();
            }
            let c = compute(input).unwrap();
            if step % 2 == 1 {
                incremental += usize::from(c.route_path.name() == "incremental");
            }
            assert_eq!(c.writes, prev.lfts.diff(&c.lfts), "seed {seed} step {step}");
            assert_eq!(*c.ports_in_use, PortUse::of(&c.lfts), "seed {seed} step {step}");
            prev = c;
        }
        assert!(incremental >= 6, "seed {seed}: {incremental} incremental generations");
    }
}
