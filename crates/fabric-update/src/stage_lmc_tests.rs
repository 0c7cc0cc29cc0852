//! The stage split with LMC ≥ 2: only the last offset of every end port is an escape LID, every
//! other offset (the layers) is a base LID in every phase.

use super::*;
use fabric_topology::SwitchId;
use proptest::prelude::*;

fn plan(lmc: u8, bases: &[Lid]) -> LidPlan {
    LidPlan {
        lmc,
        max_lid: 0xBFFF,
        switch_lid: vec![1],
        end_port_base: bases.to_vec(),
    }
}

#[test]
fn mask_marks_the_last_offset_only() {
    let m = EscapeMask::new(&plan(2, &[4, 8]));
    assert_eq!(m.count(), 2);
    assert!(m.is_escape(7) && m.is_escape(11));
    for l in [4, 5, 6, 8, 9, 10, 1] {
        assert!(!m.is_escape(l), "{l}");
    }
    let m = EscapeMask::new(&plan(3, &[8, 16]));
    assert!(m.is_escape(15) && m.is_escape(23) && !m.is_escape(9) && !m.is_escape(14));
    assert_eq!(m.count(), 2);
    // LMC 1 is unchanged: base + 1.
    assert!(EscapeMask::new(&plan(1, &[2])).is_escape(3));
}

#[test]
fn layer_offsets_change_in_the_base_stage_only() {
    // LMC 2: end port at 4..=7 (layers 4, 5, 6; escape 7), switch at 1; all installed on port 1.
    let p = plan(2, &[4]);
    let m = EscapeMask::new(&p);
    let mut inst = Lfts::new(1, p.top());
    for lid in 1..=7 {
        inst.set(SwitchId(0), lid, 1);
    }
    let mut entries = [NO_ROUTE; BLOCK_SIZE];
    entries[1] = 1;
    entries[4..=7].copy_from_slice(&[1, 2, 3, 1]);
    let w = LftBlockDiff {
        switch: SwitchId(0),
        block: 0,
        entries,
    };
    let st = split_writes(&inst, std::slice::from_ref(&w), &m);
    assert!(st.escape.is_empty(), "only layers changed: {st:?}");
    assert_eq!(st.base, vec![w.clone()]);
    // The escape changes too: the escape stage writes it over the installed layers.
    let mut w2 = w.clone();
    w2.entries[7] = 3;
    let st = split_writes(&inst, std::slice::from_ref(&w2), &m);
    assert_eq!(st.escape.len(), 1);
    assert_eq!(&st.escape[0].entries[4..=7], &[1, 1, 1, 3]);
    assert_eq!(st.base, vec![w2]);
}

proptest! {
    /// For any LMC and any installed / new block: the escape stage holds the new escape entries
    /// and the installed entries of every other LID (all layer offsets included); the base
    /// stage, when present, is the new block itself; installing both stages gives the new block.
    #[test]
    fn split_keeps_base_offsets_out_of_the_escape_stage(
        lmc in 0u8..=3,
        n in 1usize..6,
        old in proptest::collection::vec(0u8..4, BLOCK_SIZE),
        new in proptest::collection::vec(0u8..4, BLOCK_SIZE),
    ) {
        let span: Lid = 1 << lmc;
        let bases: Vec<Lid> = (0..n as Lid).map(|i| span.max(2) * (i + 1)).filter(|&b| b + span <= BLOCK_SIZE as Lid).collect();
        let p = plan(lmc, &bases);
        let m = EscapeMask::new(&p);
        let mut inst = Lfts::new(1, BLOCK_SIZE as Lid - 1);
        inst.block_mut(SwitchId(0), 0).copy_from_slice(&old);
        let mut entries = [0u8; BLOCK_SIZE];
        entries.copy_from_slice(&new);
        let w = LftBlockDiff { switch: SwitchId(0), block: 0, entries };
        let st = split_writes(&inst, std::slice::from_ref(&w), &m);
        for e in &st.escape {
            for lid in 0..BLOCK_SIZE {
                let want = if m.is_escape(lid as Lid) { new[lid] } else { old[lid] };
                prop_assert_eq!(e.entries[lid], want, "LID {}", lid);
            }
        }
        for &b in &bases {
            for o in 0..span - u32::from(lmc >= 1) {
                prop_assert!(!m.is_escape(b + o));
            }
            prop_assert_eq!(m.is_escape(b + span - 1), lmc >= 1);
        }
        let mut after = inst.clone();
        after.apply(&st.escape);
        after.apply(&st.base);
        prop_assert_eq!(after.block(SwitchId(0), 0), &new[..]);
    }
}
