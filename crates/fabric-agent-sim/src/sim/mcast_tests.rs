//! Tests of the MFT storage, the flood and the multicast verification on small fat-trees
//! whose trees are built by hand.

use fabric_topology::{gen, FabricEvent};
use proptest::prelude::*;

use super::*;

/// 4 leaves of 4 end ports, 4 spines; every leaf has one cable to every spine.
const SPEC: &str = "XGFT(2;4,4;1,4)";

fn fabric() -> Fabric {
    gen::generate_str(SPEC, None).unwrap()
}

fn is_leaf(f: &Fabric, sw: SwitchId) -> bool {
    f.switch(sw)
        .external_ports()
        .any(|(_, p)| matches!(p.remote, Remote::EndPort(_)))
}

/// The port of `from` cabled to `to` (the first one).
fn port_to(f: &Fabric, from: SwitchId, to: SwitchId) -> PortNum {
    f.switch(from)
        .external_ports()
        .find(|(_, p)| matches!(p.remote, Remote::Switch { sw, .. } if sw == to))
        .map(|(n, _)| n)
        .unwrap()
}

fn set_bit(mfts: &mut [Mft], sw: SwitchId, port: PortNum, off: u32, on: bool) {
    let (block, i) = (off / MFT_BLOCK_SIZE as u32, (off % MFT_BLOCK_SIZE as u32) as usize);
    let position = (usize::from(port) / MFT_PORTS_PER_POSITION) as u8;
    let mut entries = mfts[sw.idx()].read(block, position);
    let bit = 1u16 << (usize::from(port) % MFT_PORTS_PER_POSITION);
    if on {
        entries[i] |= bit;
    } else {
        entries[i] &= !bit;
    }
    mfts[sw.idx()].apply(&[MftWrite {
        block,
        position,
        entries,
    }]);
}

/// A tree through `spine`: each member's leaf port, and both ends of the cable between each
/// leaf holding members and the spine.
fn tree(f: &Fabric, members: &[EndPortId], spine: SwitchId, off: u32) -> Vec<Mft> {
    let mut mfts = vec![Mft::default(); f.num_switches()];
    for &m in members {
        let (leaf, port) = f.end_port(m).attach.unwrap();
        set_bit(&mut mfts, leaf, port, off, true);
        set_bit(&mut mfts, leaf, port_to(f, leaf, spine), off, true);
        set_bit(&mut mfts, spine, port_to(f, spine, leaf), off, true);
    }
    mfts
}

fn spines(f: &Fabric) -> Vec<SwitchId> {
    f.switch_ids().filter(|&s| !is_leaf(f, s)).collect()
}

#[test]
fn blocks_round_trip_and_bad_blocks_are_refused_naming_block_position_and_mlid() {
    let mut m = Mft::default();
    let mut entries = vec![0u32; MFT_BLOCK_SIZE];
    entries[3] = 0b1010;
    let b = proto::MftBlock {
        block: 7,
        position: 0,
        entries,
    };
    let w = Mft::validate(&b, 8).unwrap();
    m.apply(&[w]);
    assert_eq!(m.read(7, 0)[3], 0b1010);
    assert_eq!(m.read(7, 1), [0; MFT_BLOCK_SIZE]);
    assert!(m.has(7 * 32 + 3, 1) && m.has(7 * 32 + 3, 3) && !m.has(7 * 32 + 3, 2));
    assert_eq!(m.in_use().collect::<Vec<_>>(), vec![7 * 32 + 3]);
    // Writing zeros removes the MLID.
    m.apply(&[Mft::validate(
        &proto::MftBlock {
            entries: vec![0; 32],
            ..b.clone()
        },
        8,
    )
    .unwrap()]);
    assert_eq!(m.in_use().count(), 0);

    let e = Mft::validate(
        &proto::MftBlock {
            block: MFT_BLOCKS,
            ..b.clone()
        },
        8,
    )
    .err()
    .unwrap();
    assert_eq!(e.code(), tonic::Code::OutOfRange);
    let e = Mft::validate(
        &proto::MftBlock {
            position: 1,
            ..b.clone()
        },
        8,
    )
    .err()
    .unwrap();
    assert!(e.message().contains("position 1"), "{e}");
    let e = Mft::validate(
        &proto::MftBlock {
            entries: vec![0; 31],
            ..b.clone()
        },
        8,
    )
    .err()
    .unwrap();
    assert!(e.message().contains("31 entries"), "{e}");
    // Port 9 on an 8-port switch; the MLID is named.
    let mut bad = b.clone();
    bad.entries[5] = 1 << 9;
    let e = Mft::validate(&bad, 8).err().unwrap();
    assert!(e.message().contains("0xc0e5"), "{e}");
    // A 36-port switch has positions 0..=2; position 2 holds ports 32..=36.
    let ok = proto::MftBlock {
        block: 0,
        position: 2,
        entries: vec![0b1_1111; 32],
    };
    assert!(Mft::validate(&ok, 36).is_ok());
    let too_far = proto::MftBlock {
        entries: vec![0b11_1111; 32],
        ..ok
    };
    assert!(Mft::validate(&too_far, 36).is_err());
}

#[test]
fn a_loop_through_a_second_spine_is_reported_with_duplicates_naming_mlid_and_end_port() {
    let f = fabric();
    let eps: Vec<EndPortId> = (0..f.num_end_ports() as u32).map(EndPortId).collect();
    // Members on two different leaves.
    let a = eps[0];
    let b = *eps
        .iter()
        .find(|&&e| f.end_port(e).attach.unwrap().0 != f.end_port(a).attach.unwrap().0)
        .unwrap();
    let sp = spines(&f);
    let mut mfts = tree(&f, &[a, b], sp[0], 5);
    assert_eq!(verify(&f, &mfts).failure_count, 0);
    // The same tree through the second spine as well: a cycle leaf-spine0-leaf-spine1.
    for m in [a, b] {
        let leaf = f.end_port(m).attach.unwrap().0;
        set_bit(&mut mfts, leaf, port_to(&f, leaf, sp[1]), 5, true);
        set_bit(&mut mfts, sp[1], port_to(&f, sp[1], leaf), 5, true);
    }
    let r = verify(&f, &mfts);
    assert_eq!((r.mlids_checked, r.failed_mlids), (1, 1));
    let dup = r
        .failures
        .iter()
        .find(|x| x.end_port == f.end_port(b).port_guid && x.sender == f.end_port(a).port_guid)
        .expect("b gets duplicates of a's packet");
    assert_eq!(dup.copies, 2);
    assert!(dup.reason.contains("0xc005") && dup.reason.contains(&fmt_guid(f.end_port(b).port_guid)));
    assert!(r
        .failures
        .iter()
        .any(|x| x.switch_guid != 0 && x.reason.contains("more than once")));
}

#[test]
fn a_dead_link_in_the_tree_misses_the_members_behind_it() {
    let f = fabric();
    let sp = spines(&f);
    let (a, b) = (EndPortId(0), EndPortId(f.num_end_ports() as u32 - 1));
    let (la, lb) = (f.end_port(a).attach.unwrap().0, f.end_port(b).attach.unwrap().0);
    assert_ne!(la, lb);
    let mfts = tree(&f, &[a, b], sp[0], 0);
    let dead = f
        .apply(&[FabricEvent::LinkDown {
            switch: f.switch(lb).guid,
            port: port_to(&f, lb, sp[0]),
        }])
        .unwrap();
    let r = verify(&dead, &mfts);
    assert_eq!(r.failure_count, 2, "{:?}", r.failures);
    assert!(r.failures.iter().all(|x| x.copies == 0));
    // A member that is down is not a receiver: counted, not checked.
    let down = f.apply(&[FabricEvent::EndPortDown(f.end_port(b).port_guid)]).unwrap();
    let r = verify(&down, &mfts);
    assert_eq!((r.failure_count, r.members_down, r.floods), (0, 1, 1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A tree through one spine spanning any member set passes: every member's packet reaches
    /// every other member exactly once and nothing else.
    #[test]
    fn hand_built_trees_pass(mask in 1u16.., spine in 0usize..4, block in 0u32..MFT_BLOCKS, i in 0u32..32) {
        let f = fabric();
        let members: Vec<EndPortId> = (0..16u32).filter(|b| mask & (1 << b) != 0).map(EndPortId).collect();
        let off = block * 32 + i;
        let mfts = tree(&f, &members, spines(&f)[spine], off);
        let r = verify(&f, &mfts);
        prop_assert_eq!(r.failure_count, 0, "{:?}", r.failures.first());
        prop_assert_eq!((r.mlids_checked, r.floods), (1, members.len() as u64));
        for &m in &members {
            let fl = flood(&f, &mfts, m, off);
            let got: Vec<EndPortId> = fl.received.keys().copied().collect();
            let want: Vec<EndPortId> = members.iter().copied().filter(|&x| x != m).collect();
            prop_assert_eq!(got, want);
            prop_assert!(fl.received.values().all(|&c| c == 1));
        }
    }

    /// Removing the spine's bit towards one leaf misses exactly that leaf's members, for every
    /// sender on another leaf; the failures name the MLID and the missed end port.
    #[test]
    fn a_missing_bit_is_reported_per_missed_member(mask in 1u16.., cut in 0usize..16) {
        let f = fabric();
        let members: Vec<EndPortId> = (0..16u32).filter(|b| mask & (1 << b) != 0).map(EndPortId).collect();
        let cut_leaf = f.end_port(members[cut % members.len()]).attach.unwrap().0;
        let spine = spines(&f)[0];
        let mut mfts = tree(&f, &members, spine, 1);
        set_bit(&mut mfts, spine, port_to(&f, spine, cut_leaf), 1, false);
        let leaf_of = |e: EndPortId| f.end_port(e).attach.unwrap().0;
        let (inside, outside): (Vec<_>, Vec<_>) = members.iter().partition(|&&m| leaf_of(m) == cut_leaf);
        let r = verify(&f, &mfts);
        prop_assert_eq!(r.failure_count, (inside.len() * outside.len()) as u64);
        for x in &r.failures {
            let missed = f.end_port_by_guid(x.end_port).unwrap();
            prop_assert!(inside.contains(&missed) && x.copies == 0);
            prop_assert!(x.reason.contains("0xc001") && x.reason.contains(&fmt_guid(x.end_port)));
        }
    }
}

/// Cost of the multicast verification (run by hand: `cargo test -p fabric-agent-sim --bins
/// --release -- --ignored verify_cost --nocapture`): 1 024 end ports, 200 groups of 64.
#[test]
#[ignore = "measurement, run by hand in release"]
fn verify_cost() {
    let f = gen::generate_str("PGFT(2;32,32;1,32;1,1)", None).unwrap();
    let sp = spines(&f);
    let n = f.num_end_ports() as u64;
    let mut mfts = vec![Mft::default(); f.num_switches()];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for g in 0..200u32 {
        let mut members = BTreeSet::new();
        while members.len() < 64 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            members.insert(EndPortId(((x >> 33) % n) as u32));
        }
        let members: Vec<EndPortId> = members.into_iter().collect();
        let t = tree(&f, &members, sp[g as usize % sp.len()], g);
        for (m, add) in mfts.iter_mut().zip(t) {
            for off in add.in_use().collect::<Vec<_>>() {
                m.masks.insert(off, add.masks[&off]);
            }
        }
    }
    let t0 = std::time::Instant::now();
    let r = verify(&f, &mfts);
    let dt = t0.elapsed();
    assert_eq!((r.mlids_checked, r.floods, r.failure_count), (200, 200 * 64, 0));
    println!(
        "verify: {} switches, {} end ports, {} MLIDs, {} floods in {:?}",
        f.num_switches(),
        n,
        r.mlids_checked,
        r.floods,
        dt
    );
}
