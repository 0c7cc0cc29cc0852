//! The per-destination traversal shared by Ftree (thesis Alg. 1), Ftree2 (Alg. 9) and
//! Ftree-Random (Alg. 8), on flat arrays over the oriented switches of [`crate::prep`].
//!
//! The printed algorithms call `Descend(s, δ)` right after reaching the upper switch `a` from
//! `s`; that would never descend from a top switch, so (as the prose says: "goes as far down as
//! possible before going up") the switch that was just reached is descended from:
//! `Descend(a, δ)` then `Ascend(a, δ)`. Δ counts the leaves still without an entry for `δ`; it
//! is decremented when a leaf is reached, and every loop stops once it is 0 (so in a complete
//! PGFT only the primary routes are computed, as the thesis notes).
//!
//! Usage counters: Alg. 1 increments an up port's usage only on the primary iteration (the
//! first up port of the loop); §5.1.2 says Ftree2's up port counters work "like Ftree", and its
//! asc-usage counts the same primary ascents: the secondary routes of the fault-tolerant loop
//! are computed but never used (Fig. 1.7b, 5.2). Counting them as well (a literal reading of
//! Alg. 9) ruins Ftree2 under degradation: on `PGFT(3;24,12,30;1,12,12;1,2,1)` with 2 % of
//! the cables removed, mu_sp 29 and mu_rp median 31 instead of 10 and 9. `Descend` routes are
//! all used; they always count (for Ftree: the least used parallel port of a down group, as
//! OpenSM's `counter_up`).
//!
//! One guard makes the traversal complete on any orientation: `Descend` never enters a switch
//! that has a downward path to the destination's leaf (finite downcost). Such a switch is
//! reachable upward from the leaf, so `Ascend` reaches it and routes it *down*; descending into
//! it first would give it an up route and block the ascent through it (stranding the switches
//! that can only reach the leaf through it). In a PGFT, complete or degraded, no descent can
//! meet such a switch (top-to-leaf down paths are unique), so the guard changes nothing there.
//! With it, every switch with an up*/down* path to the leaf gets an entry (unless Δ reached 0
//! first), and every entry is up*/down*: a switch reached by `Ascend` points down towards the
//! switch it was reached from, one reached by `Descend` points up towards its descender.

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::lft::NO_ROUTE;
use crate::prep::INF;

use super::Graph;

/// Which ordering rule the traversal applies.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Rule {
    /// Alg. 1: upports by usage (incremented on the primary iteration); in a down group the
    /// least used parallel port.
    Ftree,
    /// Alg. 9: remote switch asc/desc usage first, then port usage.
    Ftree2,
    /// Alg. 8: random orders.
    Random,
}

/// Usage counters that persist across destinations (Ftree, Ftree2).
pub(super) struct Usage {
    /// Per up-link entry of [`Graph::ups`]: routes set through it by `Ascend`.
    pub up: Vec<u32>,
    /// Per down-link entry of [`Graph::downs`]: routes set through it by `Descend`.
    pub down: Vec<u32>,
    /// Ftree2: per switch position, how many times it was reached by `Ascend` / `Descend`.
    pub asc: Vec<u32>,
    pub desc: Vec<u32>,
}

impl Usage {
    pub fn new(g: &Graph) -> Self {
        Usage {
            up: vec![0; g.ups.len()],
            down: vec![0; g.downs.len()],
            asc: vec![0; g.len()],
            desc: vec![0; g.len()],
        }
    }
}

/// One destination's traversal state (reused across destinations by one task).
pub(super) struct Walk<'g> {
    g: &'g Graph,
    rule: Rule,
    /// Downcost row selector: the destination leaf's column.
    leaf: usize,
    /// Leaves still to reach (Δ).
    delta: usize,
    /// The destination's column: per position, the output port (or [`NO_ROUTE`]).
    col: Vec<u8>,
    /// Scratch for the sorted link orders of the frames on the recursion stack.
    stack: Vec<u32>,
    /// Scratch of [`Walk::order`]: group usage per link of the range.
    keys: Vec<u64>,
    pub rng: Option<ChaCha8Rng>,
}

impl<'g> Walk<'g> {
    pub fn new(g: &'g Graph, rule: Rule) -> Self {
        Walk {
            g,
            rule,
            leaf: 0,
            delta: 0,
            col: vec![NO_ROUTE; g.len()],
            stack: Vec::new(),
            keys: Vec::new(),
            rng: None,
        }
    }

    /// Routes one destination attached to leaf position `lp` through leaf port `port`; the
    /// column (one port per position, [`NO_ROUTE`] where unreached) is left in `out`.
    pub fn route(&mut self, lp: u32, port: u8, usage: &mut Usage, out: &mut [u8]) {
        self.col.fill(NO_ROUTE);
        self.leaf = self.g.leaf_idx[lp as usize] as usize;
        self.col[lp as usize] = port;
        // The leaf itself is counted by its own descent (the printed `Descend(s, δ)` with
        // `s = l`), which also routes whatever lies below it (BFS directions).
        self.delta = self.g.nleaves;
        self.descend(lp as usize, usage);
        self.ascend(lp as usize, usage);
        out.copy_from_slice(&self.col);
    }

    /// Fills `self.stack[base..]` with the indices (into `g.ups` / `g.downs`) of `range` in the
    /// order of the rule.
    fn order(&mut self, range: std::ops::Range<usize>, is_up: bool, usage: &Usage) {
        let base = self.stack.len();
        let range_start = range.start;
        self.stack.extend(range.map(|i| i as u32));
        let g = self.g;
        let links = if is_up { &g.ups } else { &g.downs };
        let seg = &mut self.stack[base..];
        match self.rule {
            Rule::Ftree => {
                if is_up {
                    // As OpenSM: the least used port group (the parallel links to one remote
                    // switch, contiguous here), then its least used port. Stable: ties keep
                    // port order.
                    let mut k = 0;
                    while k < seg.len() {
                        let r = links[seg[k] as usize].remote;
                        let mut j = k;
                        let mut sum = 0u64;
                        while j < seg.len() && links[seg[j] as usize].remote == r {
                            sum += u64::from(usage.up[seg[j] as usize]);
                            j += 1;
                        }
                        self.keys.extend(std::iter::repeat_n(sum, j - k));
                        k = j;
                    }
                    let keys = &self.keys;
                    let first = range_start;
                    seg.sort_by_key(|&i| (keys[i as usize - first], usage.up[i as usize]));
                    self.keys.clear();
                }
            }
            Rule::Ftree2 => {
                let (remote, own) = if is_up {
                    (&usage.asc, &usage.up)
                } else {
                    (&usage.desc, &usage.down)
                };
                seg.sort_by_key(|&i| (remote[links[i as usize].remote as usize], own[i as usize]));
            }
            Rule::Random => {
                if let Some(rng) = self.rng.as_mut() {
                    seg.shuffle(rng);
                }
            }
        }
    }

    fn ascend(&mut self, s: usize, usage: &mut Usage) {
        let g = self.g;
        let base = self.stack.len();
        self.order(g.up_range(s), true, usage);
        let n = self.stack.len() - base;
        for k in 0..n {
            let i = self.stack[base + k] as usize;
            let l = g.ups[i];
            let a = l.remote as usize;
            if self.col[a] != NO_ROUTE {
                continue;
            }
            self.col[a] = l.rport;
            match self.rule {
                Rule::Ftree => {
                    if k == 0 {
                        usage.up[i] += 1;
                    }
                }
                Rule::Ftree2 => {
                    // Primary iteration only, as Ftree's counters (§5.1.2: "like Ftree"):
                    // secondary routes are computed but never used, so they are no usage.
                    if k == 0 {
                        usage.up[i] += 1;
                        usage.asc[a] += 1;
                    }
                }
                Rule::Random => {}
            }
            self.descend(a, usage);
            self.ascend(a, usage);
            if self.delta == 0 {
                break;
            }
        }
        self.stack.truncate(base);
    }

    fn descend(&mut self, s: usize, usage: &mut Usage) {
        let g = self.g;
        if g.leaf_idx[s] != u32::MAX {
            // Saturating: as printed, `Ascend` takes its first up port even when Δ is already 0.
            self.delta = self.delta.saturating_sub(1);
        }
        if self.delta == 0 {
            return;
        }
        let base = self.stack.len();
        let range = g.down_range(s);
        self.order(range.clone(), false, usage);
        let n = self.stack.len() - base;
        let mut k = 0;
        while k < n {
            let mut i = self.stack[base + k] as usize;
            let b = g.downs[i].remote as usize;
            if self.rule == Rule::Ftree {
                // Alg. 1 iterates over down groups: the parallel links to `b` are contiguous;
                // take the least used one of the group.
                let mut j = k + 1;
                while j < n && g.downs[self.stack[base + j] as usize].remote as usize == b {
                    if usage.down[self.stack[base + j] as usize] < usage.down[i] {
                        i = self.stack[base + j] as usize;
                    }
                    j += 1;
                }
                k = j;
            } else {
                k += 1;
            }
            if self.col[b] != NO_ROUTE || g.down_cost(b, self.leaf) != INF {
                continue;
            }
            self.col[b] = g.downs[i].rport;
            match self.rule {
                Rule::Ftree => usage.down[i] += 1,
                Rule::Ftree2 => {
                    usage.down[i] += 1;
                    usage.desc[b] += 1;
                }
                Rule::Random => {}
            }
            self.descend(b, usage);
            if self.delta == 0 {
                break;
            }
        }
        self.stack.truncate(base);
    }
}
