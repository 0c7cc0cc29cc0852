//! The incremental path against the reference: [`route_all_checked`] on every snapshot of random
//! sequences of cable and switch removals and restorations on random degraded PGFTs.

use std::sync::Arc;

use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use fabric_ranking::{rank, RankOptions};
use fabric_topology::{Fabric, FabricEvent, Remote};

use super::*;
use crate::testutil::{degrade, pgft};
use crate::{assign_lids, Guid2Lid, IB_MAX_UNICAST_LID};

/// The check with its timings cleared.
fn untimed(c: &RoutingCheck) -> RoutingCheck {
    RoutingCheck {
        check_ms: 0.0,
        fallback_ms: 0.0,
        ..c.clone()
    }
}

/// Every cable of `f` (one end) and every switch, as events that take them down.
fn elements(f: &Fabric) -> (Vec<(u64, u8)>, Vec<u64>) {
    let mut cables = Vec::new();
    for s in f.switch_ids() {
        for (pn, port) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, port: rp } = port.remote {
                if (sw, rp) > (s, pn) {
                    cables.push((f.switch(s).guid, pn));
                }
            }
        }
    }
    (cables, f.switch_ids().map(|s| f.switch(s).guid).collect())
}

/// Runs `steps` random events from `start` (a degraded fabric), routing each snapshot both ways
/// and comparing; returns the paths taken.
fn run(start: Fabric, lmc: u8, steps: usize, seed: u64) -> Vec<RoutePath> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let lids = assign_lids(&start, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).unwrap();
    let (cables, switches) = elements(&start);
    let mut f = Arc::new(start);
    let mut state: Option<RoutingState> = None;
    let mut paths = Vec::new();
    for step in 0..=steps {
        if step > 0 {
            // A batch of 1–2 events: cables and switches, down and up.
            let n = rng.gen_range(1..=2);
            let mut ev = Vec::new();
            for _ in 0..n {
                let e = match rng.gen_range(0..10) {
                    0..=4 => {
                        let &(switch, port) = cables.choose(&mut rng).unwrap();
                        FabricEvent::LinkDown { switch, port }
                    }
                    5..=7 => {
                        let &(switch, port) = cables.choose(&mut rng).unwrap();
                        FabricEvent::LinkUp { switch, port }
                    }
                    8 => FabricEvent::SwitchDown(*switches.choose(&mut rng).unwrap()),
                    _ => FabricEvent::SwitchUp(*switches.choose(&mut rng).unwrap()),
                };
                if f.check_event(&e).is_ok() {
                    ev.push(e);
                }
            }
            match f.apply(&ev) {
                Ok(next) => f = Arc::new(next),
                Err(_) => continue,
            }
        }
        let ranking = rank(&f, &RankOptions::default());
        let ctx = RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        let (want, want_check) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        let got = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, None, state.as_ref()).unwrap();
        assert!(
            *got.lfts == want.lfts,
            "seed {seed} step {step}: tables differ ({:?})",
            got.path
        );
        assert_eq!(
            untimed(&got.check),
            untimed(&want_check),
            "seed {seed} step {step} ({:?})",
            got.path
        );
        paths.push(got.path);
        state = got.state;
    }
    paths
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Byte-identical tables and an identical check, whatever the events, with LMC 0 and 1.
    #[test]
    fn incremental_equals_full_routing(
        shape in 0usize..3,
        links in 0usize..8,
        switches in 0usize..2,
        lmc in 0u8..2,
        seed in any::<u64>(),
    ) {
        let t = match shape {
            0 => pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]),
            1 => pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]),
            _ => pgft(&[2, 3, 2, 3], &[1, 2, 3, 2], &[1, 1, 2, 1]),
        };
        let f = degrade(&t.fabric, links, switches, seed);
        run(f, lmc, 6, seed);
    }
}

#[test]
fn single_cable_faults_take_the_incremental_path() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let mut incremental = 0;
    for seed in 0..4 {
        let paths = run(t.fabric.clone(), 1, 5, seed);
        assert_eq!(paths[0], RoutePath::Full(FullReason::NoPrevious));
        incremental += paths.iter().filter(|p| matches!(p, RoutePath::Incremental(_))).count();
    }
    assert!(incremental >= 8, "only {incremental} incremental generations");
}

#[test]
fn other_engines_and_node_groups_are_routed_in_full() {
    let t = pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]);
    let f = Arc::new(t.fabric);
    let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let ranking = rank(&f, &RankOptions::default());
    let first = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, None, None).unwrap();
    let r = route_checked_incremental(&f, &ranking, &lids, EngineKind::UpDown, None, first.state.as_ref()).unwrap();
    assert_eq!(r.path, RoutePath::Full(FullReason::Engine));
    assert!(r.state.is_none());
    let g = NodeGroups::from_sets::<Vec<fabric_topology::EndPortId>>(f.num_end_ports(), &[]);
    let r = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, Some(&g), first.state.as_ref()).unwrap();
    assert_eq!(r.path, RoutePath::Full(FullReason::Engine));
    // A changed LID plan.
    let other = assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).unwrap();
    let r = route_checked_incremental(&f, &ranking, &other, EngineKind::Dmodc, None, first.state.as_ref()).unwrap();
    assert_eq!(r.path, RoutePath::Full(FullReason::LidPlan));
    // The same snapshot again: nothing to re-fill.
    let r = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, None, first.state.as_ref()).unwrap();
    match r.path {
        RoutePath::Incremental(s) => {
            assert_eq!(
                (s.base_rows, s.switch_lid_rows, s.escape_rows, s.changed_entries),
                (0, 0, 0, 0)
            );
        }
        p => panic!("{p:?}"),
    }
}

/// From the third generation on, the target tables recycle the allocation of the generation
/// before the previous one and copy only the rows the previous generation changed; the tables
/// stay those of the full routing (checked by `run` on every step, here on a longer run).
#[test]
fn the_target_recycles_the_generation_before_and_copies_only_changed_rows() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let ns = t.fabric.num_switches();
    let lids = assign_lids(&t.fabric, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let (cables, _) = elements(&t.fabric);
    let mut f = Arc::new(t.fabric.clone());
    let mut state: Option<RoutingState> = None;
    let mut recycled = 0;
    for step in 0..9 {
        // Steps 1, 3, 5, 7 take a cable down, the next step brings it back up.
        let (switch, port) = cables[(step - step % 2 + 1) * 7 % cables.len()];
        let ev = if step % 2 == 1 {
            FabricEvent::LinkDown { switch, port }
        } else {
            FabricEvent::LinkUp { switch, port }
        };
        if step > 0 {
            f = Arc::new(f.apply(&[ev]).unwrap());
        }
        let ranking = rank(&f, &RankOptions::default());
        let ctx = RoutingContext {
            fabric: &f,
            ranking: &ranking,
            lids: &lids,
        };
        let (want, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        // Another holder of the spare at step 5: it is not recycled (a fresh copy, same bytes).
        let held = (step == 5).then(|| state.as_ref().and_then(|s| s.spare.lock().unwrap().lfts.clone()));
        let got = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, None, state.as_ref()).unwrap();
        assert!(*got.lfts == want.lfts, "step {step}: tables differ ({:?})", got.path);
        if let RoutePath::Incremental(s) = &got.path {
            if s.copied_rows < ns {
                recycled += 1;
            }
            if step == 5 {
                assert_eq!(s.copied_rows, ns, "a spare held elsewhere is not recycled");
            }
        }
        state = got.state;
        drop(held);
    }
    assert!(recycled >= 4, "only {recycled} generations recycled their target");
}

/// After a full routing, a spare prepared from the generation's own tables
/// (`RoutingState::prepare_spare`) is recycled by the next incremental routing with no row
/// copied (without it every row is copied into fresh memory), and the tables are the full
/// routing's; a state whose spare is the generation before's is left as it is.
#[test]
fn a_prepared_spare_after_a_full_routing_is_recycled_without_copying() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let ns = t.fabric.num_switches();
    let lids = assign_lids(&t.fabric, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let (cables, _) = elements(&t.fabric);
    let f0 = Arc::new(t.fabric.clone());
    let r0 = rank(&f0, &RankOptions::default());
    let route = |f: &Arc<Fabric>, prev: Option<&RoutingState>| {
        let ranking = rank(f, &RankOptions::default());
        let ctx = RoutingContext {
            fabric: f,
            ranking: &ranking,
            lids: &lids,
        };
        let (want, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
        let got = route_checked_incremental(f, &ranking, &lids, EngineKind::Dmodc, None, prev).unwrap();
        assert!(*got.lfts == want.lfts, "tables differ ({:?})", got.path);
        got
    };
    let (switch, port) = cables[3];
    let down = Arc::new(f0.apply(&[FabricEvent::LinkDown { switch, port }]).unwrap());
    for prepared in [false, true] {
        // (The routing's own handle on the tables is dropped: only the state holds them.)
        let s0 = route_checked_incremental(&f0, &r0, &lids, EngineKind::Dmodc, None, None)
            .unwrap()
            .state
            .expect("a state");
        if prepared {
            assert!(s0.prepare_spare(), "a full routing has no spare");
            assert!(!s0.prepare_spare(), "made once");
        }
        let second = route(&down, Some(&s0));
        let RoutePath::Incremental(st) = &second.path else {
            panic!("{:?}", second.path)
        };
        assert_eq!(st.copied_rows, if prepared { 0 } else { ns }, "prepared: {prepared}");
        // After an incremental routing the spare is the generation before's: nothing to make.
        let s1 = second.state.expect("a state");
        assert!(!s1.prepare_spare());
        drop(s0);
        let third = route(&f0, Some(&s1));
        let RoutePath::Incremental(st) = &third.path else {
            panic!("{:?}", third.path)
        };
        assert!(st.copied_rows < ns, "recycled: {} rows of {ns}", st.copied_rows);
    }
}

/// A spare promised after a full routing (`RoutingState::reserve_spare`) and still being
/// made when the next routing starts (the daemon's first fault arriving right after the first
/// generation is installed) is waited for: the routing copies no row. Without the wait the
/// routing found no spare and copied every row into fresh memory. A promise withdrawn (the job
/// dropped unrun) does not block the routing, which then copies every row itself.
#[test]
fn a_routing_waits_for_a_spare_being_prepared() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let ns = t.fabric.num_switches();
    let lids = assign_lids(&t.fabric, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let (cables, _) = elements(&t.fabric);
    let f0 = Arc::new(t.fabric.clone());
    let r0 = rank(&f0, &RankOptions::default());
    let (switch, port) = cables[5];
    let down = Arc::new(f0.apply(&[FabricEvent::LinkDown { switch, port }]).unwrap());
    let r1 = rank(&down, &RankOptions::default());
    let ctx = RoutingContext {
        fabric: &down,
        ranking: &r1,
        lids: &lids,
    };
    let (want, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
    for run in [true, false] {
        let s0 = Arc::new(
            route_checked_incremental(&f0, &r0, &lids, EngineKind::Dmodc, None, None)
                .unwrap()
                .state
                .expect("a state"),
        );
        let job = s0.reserve_spare().expect("a full routing has no spare");
        assert!(s0.reserve_spare().is_none(), "promised once");
        // The job runs (or is dropped) only after the routing below has started.
        let worker = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if run {
                assert!(job.run(), "made the copy");
            } else {
                drop(job);
            }
        });
        let got = route_checked_incremental(&down, &r1, &lids, EngineKind::Dmodc, None, Some(&s0)).unwrap();
        worker.join().unwrap();
        assert!(*got.lfts == want.lfts, "tables differ ({:?})", got.path);
        let RoutePath::Incremental(st) = &got.path else {
            panic!("{:?}", got.path)
        };
        assert_eq!(st.copied_rows, if run { 0 } else { ns }, "job run: {run}");
        assert!(!s0.prepare_spare(), "taken: nothing more to make");
    }
}

/// A spare another holder lets go of shortly after the routing starts (in the daemon: an SA
/// snapshot build of the generation before) is still recycled: the routing waits for it
/// instead of copying every row into fresh memory (which it did without the wait).
#[test]
fn a_spare_released_soon_after_the_routing_starts_is_recycled() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let ns = t.fabric.num_switches();
    let lids = assign_lids(&t.fabric, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let (cables, _) = elements(&t.fabric);
    let f0 = Arc::new(t.fabric.clone());
    let r0 = rank(&f0, &RankOptions::default());
    let (switch, port) = cables[2];
    let down = Arc::new(f0.apply(&[FabricEvent::LinkDown { switch, port }]).unwrap());
    let r1 = rank(&down, &RankOptions::default());
    let s0 = route_checked_incremental(&f0, &r0, &lids, EngineKind::Dmodc, None, None)
        .unwrap()
        .state
        .expect("a state");
    let s1 = route_checked_incremental(&down, &r1, &lids, EngineKind::Dmodc, None, Some(&s0))
        .unwrap()
        .state
        .expect("a state");
    drop(s0);
    // s1's spare is s0's tables: held by someone else for 100 ms after the routing starts.
    let held = s1.spare.lock().unwrap().lfts.clone().expect("a spare");
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(held);
    });
    let got = route_checked_incremental(&f0, &r0, &lids, EngineKind::Dmodc, None, Some(&s1)).unwrap();
    holder.join().unwrap();
    let ctx = RoutingContext {
        fabric: &f0,
        ranking: &r0,
        lids: &lids,
    };
    let (want, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
    assert!(*got.lfts == want.lfts, "tables differ ({:?})", got.path);
    let RoutePath::Incremental(st) = &got.path else {
        panic!("{:?}", got.path)
    };
    assert!(st.copied_rows < ns, "recycled: {} rows of {ns} copied", st.copied_rows);
}

/// A leaf's cable to a level-2 switch (a leaf-level cable, the commonest fault): the switches
/// whose neighbourhood or divider is unchanged but whose closer groups towards that leaf
/// change (every other leaf, through the level-2 switches that lost their up-down path to it)
/// are re-filled only for that leaf's destinations (`base_partial_rows`), and the tables —
/// including the recycled copies of the following generations, which copy only those entries —
/// are the full routing's. A partial re-fill that missed a changed column, or a copy that
/// missed an entry, would differ from the full routing.
#[test]
fn a_leaf_cable_fault_refills_only_that_leafs_destinations_elsewhere() {
    let t = pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]);
    let f0 = Arc::new(t.fabric.clone());
    let ns = f0.num_switches();
    for lmc in [0u8, 1] {
        let lids = assign_lids(&f0, &Guid2Lid::default(), lmc, IB_MAX_UNICAST_LID).unwrap();
        // Leaf-to-level-2 cables (leaves have end ports).
        let (cables, _) = elements(&f0);
        let leaf_cables: Vec<(u64, u8)> = cables
            .iter()
            .copied()
            .filter(|&(g, _)| f0.is_leaf(f0.switch_by_guid(g).unwrap()))
            .collect();
        assert!(!leaf_cables.is_empty());
        let mut state: Option<RoutingState> = None;
        let mut f = f0.clone();
        let mut partial = 0;
        for step in 0usize..7 {
            if step > 0 {
                // Down on odd steps, the same cable back up on the next step.
                let (switch, port) = leaf_cables[step.div_ceil(2) * 5 % leaf_cables.len()];
                let ev = if step % 2 == 1 {
                    FabricEvent::LinkDown { switch, port }
                } else {
                    FabricEvent::LinkUp { switch, port }
                };
                f = Arc::new(f.apply(&[ev]).unwrap());
            }
            let ranking = rank(&f, &RankOptions::default());
            let ctx = RoutingContext {
                fabric: &f,
                ranking: &ranking,
                lids: &lids,
            };
            let (want, want_check) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
            let got = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, None, state.as_ref()).unwrap();
            assert!(*got.lfts == want.lfts, "lmc {lmc} step {step}: tables differ");
            assert_eq!(untimed(&got.check), untimed(&want_check), "lmc {lmc} step {step}");
            if let RoutePath::Incremental(s) = &got.path {
                assert!(s.base_rows < ns, "lmc {lmc} step {step}: every row re-filled");
                partial += s.base_partial_rows;
            }
            state = got.state;
        }
        assert!(partial > 0, "lmc {lmc}: no partial re-fill");
    }
}

/// A sequence (found by the proptest) whose last cable faults leave a live switch unranked: the
/// snapshot is no longer of a fat-tree shape, so the full check also checks the switch LIDs and
/// repairs them by Up*/Down*; the incremental check (end-port LIDs only) must not conclude in
/// its place.
#[test]
fn a_snapshot_that_stops_being_a_fat_tree_gets_the_full_check() {
    let t = pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]);
    let seed = 11187318323301767711;
    run(degrade(&t.fabric, 0, 1, seed), 0, 6, seed);
}
