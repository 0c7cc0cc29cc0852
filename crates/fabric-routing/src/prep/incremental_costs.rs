//! Dmodc's costs and downcosts (thesis §4.2.1, Alg. 5; [`crate::prep::costs`]) re-computed
//! only where their inputs changed: when the new orientation has the same rows (switches,
//! positions, levels, leaves) as the previous one, a downcost row is recomputed when its set
//! of down neighbours changed or one of their downcost rows changed (ascending levels), and a
//! cost row when its downcost row, its set of up neighbours or one of their cost rows changed
//! (descending levels); every other row is the previous one. Each recomputed row uses the
//! formula of the full pass, so the matrices are those of [`crate::prep::costs`] (by induction
//! over the levels).

use rayon::prelude::*;

use crate::prep::{relax, Costs, Nbr, Oriented, INF, NONE};

/// The positions of a neighbour list (what the costs depend on; the port groups do not matter).
fn same_positions(a: &[Nbr], b: &[Nbr]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.pos == y.pos)
}

/// [`crate::prep::costs`] of `o` from `prev` (costs of `po`), or `None` when the rows differ
/// (other switches, positions, levels or leaves).
pub(crate) fn costs_from(o: &Oriented, po: &Oriented, prev: &Costs) -> Option<Costs> {
    let nl = o.num_leaves();
    if o.order != po.order
        || o.level_ranges != po.level_ranges
        || o.leaves != po.leaves
        || prev.nleaves != nl
        || nl == 0
    {
        return None;
    }
    let np = o.len();
    let mut down = prev.down.clone();
    let mut down_changed = vec![false; np];
    for r in &o.level_ranges {
        let (lower, rest) = down.split_at_mut(r.start * nl);
        let lower: &[u8] = lower;
        let block = &mut rest[..r.len() * nl];
        let (done, flags) = down_changed.split_at_mut(r.start);
        let done: &[bool] = done;
        block
            .par_chunks_mut(nl)
            .zip(flags[..r.len()].par_iter_mut())
            .enumerate()
            .for_each_init(Vec::new, |tmp, (i, (row, changed))| {
                let p = r.start + i;
                let dirty =
                    !same_positions(o.downs(p), po.downs(p)) || o.downs(p).iter().any(|nb| done[nb.pos as usize]);
                if !dirty {
                    return;
                }
                tmp.clear();
                tmp.resize(nl, INF);
                for nb in o.downs(p) {
                    relax(tmp, &lower[nb.pos as usize * nl..(nb.pos as usize + 1) * nl]);
                }
                let li = o.leaf_idx[p];
                if li != NONE {
                    tmp[li as usize] = 0;
                }
                if tmp[..] != row[..] {
                    row.copy_from_slice(tmp);
                    *changed = true;
                }
            });
    }
    let mut full = prev.full.clone();
    let mut full_changed = vec![false; np];
    for r in o.level_ranges.iter().rev() {
        let (head, upper) = full.split_at_mut(r.end * nl);
        let upper: &[u8] = upper;
        let block = &mut head[r.start * nl..];
        let (flags, done) = full_changed.split_at_mut(r.end);
        let done: &[bool] = done;
        let down = &down;
        block
            .par_chunks_mut(nl)
            .zip(flags[r.start..].par_iter_mut())
            .enumerate()
            .for_each_init(Vec::new, |tmp, (i, (row, changed))| {
                let p = r.start + i;
                let dirty = down_changed[p]
                    || !same_positions(o.ups(p), po.ups(p))
                    || o.ups(p).iter().any(|nb| done[nb.pos as usize - r.end]);
                if !dirty {
                    return;
                }
                tmp.clear();
                tmp.extend_from_slice(&down[p * nl..(p + 1) * nl]);
                for nb in o.ups(p) {
                    let off = (nb.pos as usize - r.end) * nl;
                    relax(tmp, &upper[off..off + nl]);
                }
                if tmp[..] != row[..] {
                    row.copy_from_slice(tmp);
                    *changed = true;
                }
            });
    }
    Some(Costs {
        nleaves: nl,
        down,
        full,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use fabric_ranking::{rank, RankOptions};
    use fabric_topology::{FabricEvent, Remote};

    use super::*;
    use crate::prep::costs;
    use crate::testutil::{degrade, pgft};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// After random cable and switch faults and restores, the costs from the previous ones
        /// (when the rows allow) equal the costs computed from scratch; a single cable fault on
        /// a complete PGFT always allows.
        #[test]
        fn costs_from_the_previous_equal_the_full_pass(
            shape in 0usize..3,
            links in 0usize..8,
            seed in any::<u64>(),
        ) {
            let t = match shape {
                0 => pgft(&[4, 4, 6], &[1, 4, 4], &[1, 1, 1]),
                1 => pgft(&[3, 3, 4], &[1, 3, 2], &[1, 2, 1]),
                _ => pgft(&[2, 3, 2, 3], &[1, 2, 3, 2], &[1, 1, 2, 1]),
            };
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut cables = Vec::new();
            for s in t.fabric.switch_ids() {
                for (pn, port) in t.fabric.switch(s).external_ports() {
                    if let Remote::Switch { sw, port: rp } = port.remote {
                        if (sw, rp) > (s, pn) {
                            cables.push((t.fabric.switch(s).guid, pn));
                        }
                    }
                }
            }
            let switches: Vec<u64> = t.fabric.switch_ids().map(|s| t.fabric.switch(s).guid).collect();
            // A single cable fault on the complete fabric: same rows.
            let o0 = Oriented::new(&t.fabric, &rank(&t.fabric, &RankOptions::default()).level);
            let c0 = costs(&o0);
            let &(switch, port) = cables.choose(&mut rng).unwrap();
            let g = t.fabric.apply(&[FabricEvent::LinkDown { switch, port }]).unwrap();
            let og = Oriented::new(&g, &rank(&g, &RankOptions::default()).level);
            let cg = costs_from(&og, &o0, &c0);
            prop_assert!(cg.is_some());
            let (cg, want) = (cg.unwrap(), costs(&og));
            prop_assert!(cg.down == want.down && cg.full == want.full);
            // Random sequences on a degraded fabric.
            let mut f = degrade(&t.fabric, links, 0, seed);
            let mut o = Oriented::new(&f, &rank(&f, &RankOptions::default()).level);
            let mut c = costs(&o);
            for _ in 0..8 {
                let e = match rng.gen_range(0..10) {
                    0..=5 => {
                        let &(switch, port) = cables.choose(&mut rng).unwrap();
                        FabricEvent::LinkDown { switch, port }
                    }
                    6..=8 => {
                        let &(switch, port) = cables.choose(&mut rng).unwrap();
                        FabricEvent::LinkUp { switch, port }
                    }
                    _ => FabricEvent::SwitchDown(*switches.choose(&mut rng).unwrap()),
                };
                let Ok(next) = f.apply(&[e]) else { continue };
                let on = Oriented::new(&next, &rank(&next, &RankOptions::default()).level);
                let want = costs(&on);
                if let Some(got) = costs_from(&on, &o, &c) {
                    prop_assert!(got.down == want.down && got.full == want.full);
                }
                (f, o, c) = (next, on, want);
            }
        }
    }
}
