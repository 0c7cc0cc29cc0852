//! Property tests of the LID plan for every LMC 0..=7: alignment, no overlap, escape = last
//! offset, owners, and keeping previous LIDs (including across LMC changes).

use proptest::prelude::*;

use super::tests::fabric;
use super::*;

/// The invariants of any plan: aligned ranges in `1..=max_lid`, no LID twice, owners agree.
fn check_plan(f: &Fabric, p: &LidPlan) -> Result<(), TestCaseError> {
    let span = p.lids_per_end_port();
    prop_assert_eq!(span, 1 << p.lmc);
    let mut seen = std::collections::HashSet::new();
    let owners = LidOwners::new(p);
    for (i, &b) in p.end_port_base.iter().enumerate() {
        let ep = EndPortId(i as u32);
        prop_assert!(b >= 1 && b + span - 1 <= p.max_lid, "range {} of {}", b, span);
        prop_assert_eq!(b % span, 0, "base {} not aligned to {}", b, span);
        for o in 0..span {
            prop_assert!(seen.insert(b + o), "LID {} twice", b + o);
            prop_assert_eq!(owners.get(b + o), Some(LidOwner::EndPort { ep, path: o as u8 }));
        }
        match p.escape_lid(ep) {
            None => prop_assert_eq!(p.lmc, 0),
            Some(l) => prop_assert_eq!(l, b + span - 1),
        }
        prop_assert_eq!(p.layer_offsets() + u32::from(p.lmc >= 1), span);
        prop_assert_eq!(p.layer_lid(ep, 0), Some(b));
        prop_assert_eq!(p.layer_lid(ep, p.layer_offsets()), None);
    }
    for (i, &l) in p.switch_lid.iter().enumerate() {
        prop_assert!(l >= 1 && l <= p.max_lid);
        prop_assert!(seen.insert(l), "LID {} twice", l);
        prop_assert_eq!(owners.get(l), Some(LidOwner::Switch(SwitchId(i as u32))));
    }
    prop_assert!(p.top() as usize + 1 >= seen.len());
    prop_assert_eq!(p.check_covers(f), Ok(()));
    Ok(())
}

#[test]
fn lmc_2_and_3_layout() {
    let f = fabric(2, 3);
    let p = assign_lids(&f, &Guid2Lid::default(), 2, IB_MAX_UNICAST_LID).unwrap();
    assert_eq!(p.end_port_base, vec![4, 8, 12]);
    assert_eq!(p.switch_lid, vec![1, 2]);
    assert_eq!(
        (p.escape_lid(EndPortId(0)), p.layer_offsets(), p.top()),
        (Some(7), 3, 15)
    );
    assert_eq!(
        p.owner(7),
        Some(LidOwner::EndPort {
            ep: EndPortId(0),
            path: 3
        })
    );
    let p = assign_lids(&f, &Guid2Lid::default(), 3, IB_MAX_UNICAST_LID).unwrap();
    assert_eq!(p.end_port_base, vec![8, 16, 24]);
    assert_eq!((p.escape_lid(EndPortId(2)), p.layer_offsets()), (Some(31), 7));
    let p = assign_lids(&f, &Guid2Lid::default(), 7, IB_MAX_UNICAST_LID).unwrap();
    assert_eq!(p.end_port_base, vec![128, 256, 384]);
    assert_eq!(Guid2Lid::from_plan(&f, &p).get(0x2001), Some((256, 383)));
    // LMC 1 is exactly the former pair.
    let p = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    assert_eq!(
        (p.end_port_base.clone(), p.escape_lid(EndPortId(1))),
        (vec![2, 4, 6], Some(5))
    );
    // The error names the LMC and suggests a smaller one.
    let e = assign_lids(&fabric(1, 40), &Guid2Lid::default(), 3, 200).unwrap_err();
    assert!(matches!(e, LidError::AddressSpaceExhausted { lmc: 3, .. }), "{e}");
    assert!(e.to_string().contains("smaller LMC"), "{e}");
}

#[test]
fn previous_ranges_across_lmc_changes() {
    let f = fabric(1, 3);
    let mut prev = Guid2Lid::new();
    prev.insert(0x2000, 0x20, 0x21); // LMC-1 pair at an LMC-2 boundary: widened to 0x20..=0x23
    prev.insert(0x2001, 0x22, 0x23); // overlaps the widened range: reassigned
    prev.insert(0x2002, 0x42, 0x43); // not aligned to 4: reassigned
    let p = assign_lids(&f, &prev, 2, IB_MAX_UNICAST_LID).unwrap();
    assert_eq!(p.end_port_base, vec![0x20, 4, 8]);
    // Back to LMC 1 from the LMC-2 record: every base is 4-aligned, hence 2-aligned: kept.
    let q = assign_lids(&f, &Guid2Lid::from_plan(&f, &p), 1, IB_MAX_UNICAST_LID).unwrap();
    assert_eq!(q.end_port_base, p.end_port_base);
}

proptest! {
    /// Any LMC, fresh or from a random previous record: the invariants hold, the plan's own
    /// record gives the same plan back, and end ports that stay keep their LIDs when others
    /// vanish (their LIDs stay reserved).
    #[test]
    fn plans_are_aligned_disjoint_and_kept(
        lmc in 0u8..=7,
        nsw in 1u32..4,
        neps in 1u32..40,
        records in proptest::collection::vec((0u32..50, 1u32..2000, 0u32..200), 0..30),
        keep_num in 0u8..8,
    ) {
        let f = fabric(nsw, neps);
        let mut prev = Guid2Lid::new();
        let mut used = std::collections::HashSet::new();
        for (g, lo, len) in records {
            let hi = lo + len.min(MAX_LIDS_PER_PORT - 1);
            if (lo..=hi).all(|l| !used.contains(&l)) && prev.get(0x2000 + u64::from(g)).is_none() {
                used.extend(lo..=hi);
                prev.insert(0x2000 + u64::from(g), lo, hi);
            }
        }
        let p = assign_lids(&f, &prev, lmc, IB_MAX_UNICAST_LID).unwrap();
        check_plan(&f, &p)?;
        // Usable previous ranges are kept.
        let span = 1u32 << lmc;
        for (i, ep) in f.end_ports().iter().enumerate() {
            if let Some((lo, hi)) = prev.get(ep.port_guid) {
                if p.end_port_base[i] != lo {
                    // Not kept: misaligned, or claimed by an earlier end port.
                    let earlier = p.end_port_base[..i].iter().any(|&b| b < lo + span && lo < b + span);
                    prop_assert!(lo % span != 0 || earlier || hi < lo, "{:#x}..{:#x} dropped", lo, hi);
                }
            }
        }
        let again = assign_lids(&f, &Guid2Lid::from_plan(&f, &p), lmc, IB_MAX_UNICAST_LID).unwrap();
        prop_assert_eq!(&again, &p);
        // The last end ports vanish: the others keep their LIDs; coming back (from the
        // record that keeps the vanished ranges reserved), the vanished ones find theirs again.
        let m = (neps * u32::from(keep_num) / 8).max(1);
        let g = fabric(nsw, m);
        let q = assign_lids(&g, &Guid2Lid::from_plan(&f, &p), lmc, IB_MAX_UNICAST_LID).unwrap();
        check_plan(&g, &q)?;
        prop_assert_eq!(&q.end_port_base[..], &p.end_port_base[..m as usize]);
        let kept = Guid2Lid::from_plan_keeping(&g, &q, &Guid2Lid::from_plan(&f, &p));
        let back = assign_lids(&f, &kept, lmc, IB_MAX_UNICAST_LID).unwrap();
        prop_assert_eq!(&back.end_port_base, &p.end_port_base);
    }
}
