//! The incremental escape preparation ([`super::escape`]) against its references: the hop
//! counts, root-test histograms and component keys kept from the previous generation equal
//! those computed from scratch, over random sequences of cable and switch faults and restores;
//! a single cable fault on a complete PGFT re-searches few leaves and keeps the escape shared
//! with the base preparation (the proof of [`crate::updown::escape_prep`]).

use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use fabric_topology::{Fabric, FabricEvent, Remote};

use super::escape::HopCounts;
use crate::testutil::{degrade, pgft};

fn cables(f: &Fabric) -> Vec<(u64, u8)> {
    let mut v = Vec::new();
    for s in f.switch_ids() {
        for (pn, port) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, port: rp } = port.remote {
                if (sw, rp) > (s, pn) {
                    v.push((f.switch(s).guid, pn));
                }
            }
        }
    }
    v
}

/// A random batch of 1–2 events (cables and switches, down and up) applicable to `f`.
fn random_events(f: &Fabric, rng: &mut impl Rng, cables: &[(u64, u8)], switches: &[u64]) -> Vec<FabricEvent> {
    let mut ev = Vec::new();
    for _ in 0..rng.gen_range(1..=2) {
        let e = match rng.gen_range(0..10) {
            0..=4 => {
                let &(switch, port) = cables.choose(rng).unwrap();
                FabricEvent::LinkDown { switch, port }
            }
            5..=7 => {
                let &(switch, port) = cables.choose(rng).unwrap();
                FabricEvent::LinkUp { switch, port }
            }
            8 => FabricEvent::SwitchDown(*switches.choose(rng).unwrap()),
            _ => FabricEvent::SwitchUp(*switches.choose(rng).unwrap()),
        };
        if f.check_event(&e).is_ok() {
            ev.push(e);
        }
    }
    ev
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Kept hop counts, histograms and component keys equal the ones from scratch, after every
    /// batch of random events.
    #[test]
    fn kept_hop_counts_equal_a_fresh_search(
        shape in 0usize..3,
        links in 0usize..8,
        switches in 0usize..2,
        seed in any::<u64>(),
    ) {
        let t = match shape {
            0 => pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]),
            1 => pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]),
            _ => pgft(&[2, 3, 2, 3], &[1, 2, 3, 2], &[1, 1, 2, 1]),
        };
        let mut f = degrade(&t.fabric, links, switches, seed);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cs = cables(&f);
        let sws: Vec<u64> = f.switch_ids().map(|s| f.switch(s).guid).collect();
        let (mut h, _) = HopCounts::new(&f, None);
        for step in 0..8 {
            let ev = random_events(&f, &mut rng, &cs, &sws);
            let Ok(next) = f.apply(&ev) else { continue };
            let (kept, _) = HopCounts::new(&next, Some((&f, &h)));
            let (fresh, searches) = HopCounts::new(&next, None);
            prop_assert_eq!(searches, fresh.num_leaves());
            prop_assert!(kept.same_as(&fresh), "seed {} step {}: {:?}", seed, step, ev);
            f = next;
            h = kept;
        }
    }
}

/// One cable fault (and its restore) on a complete PGFT: a few leaves searched again, the rest
/// kept, the escape's preparation proved equal to the base's exactly when the full routing
/// proves it, and that for most cables.
#[test]
fn a_cable_fault_searches_few_leaves_and_keeps_the_escape_shared() {
    use crate::fill::Prepared;
    use crate::updown::EscapePrep;
    use fabric_ranking::{rank, RankOptions};
    let f = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 2, 1]).fabric;
    let (h0, n0) = HopCounts::new(&f, None);
    assert_eq!(n0, h0.num_leaves());
    let (mut shared, mut total) = (0, 0);
    for (i, &(switch, port)) in cables(&f).iter().enumerate().step_by(7) {
        let g = f.apply(&[FabricEvent::LinkDown { switch, port }]).unwrap();
        let (h1, n1) = HopCounts::new(&g, Some((&f, &h0)));
        assert!(n1 < h1.num_leaves() / 2, "cable {i}: {n1} searches");
        let ranking = rank(&g, &RankOptions::default());
        let base = Prepared::new(&g, &ranking.level);
        // The same verdict as the full routing's proof (from a fresh root detection).
        let kept = matches!(super::escape::prepare(&g, &h1, &base), EscapePrep::SameAsBase);
        let reference = matches!(crate::updown::escape_prep(&g, &base), EscapePrep::SameAsBase);
        assert_eq!(kept, reference, "cable {i}");
        shared += usize::from(kept);
        total += 1;
        let (h2, n2) = HopCounts::new(&f, Some((&g, &h1)));
        assert!(n2 < h2.num_leaves() / 2, "cable {i}: restore, {n2} searches");
        assert!(h2.same_as(&h0), "cable {i}: restore");
    }
    assert!(shared * 2 > total, "escape shared after {shared} of {total} faults");
}
