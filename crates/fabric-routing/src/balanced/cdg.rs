//! The per-VL channel-dependency graph of the balanced engine, kept acyclic incrementally
//! (Pearce & Kelly, "A dynamic topological sort algorithm for directed acyclic graphs", JEA
//! 2006): every node (directed switch-to-switch channel) has a position in a topological order;
//! adding an edge `x → y` with `ord[x] < ord[y]` costs nothing, otherwise the nodes reachable
//! from `y` below `ord[x]` and those reaching `x` above `ord[y]` are searched (both at once,
//! a node of each in turn: a node reached by both is a cycle, found after about twice the
//! shorter search): a cycle refuses the edge, else the two sets are re-ordered within their
//! positions (the same sets, so the same order, as two searches one after the other). Edges are reference-counted (one reference per route that induces the
//! dependency); removing the last reference removes the edge, which keeps the order valid.
//!
//! Since 28 Nov 2026 the searches visit only present edges (a bit per out-slot and per
//! in-slot), the switch a channel leaves is a table, and the two sets are put in position
//! order by a scan of the positions between `y` and `x` when that is shorter than sorting
//! them: the same searches and the same order as before, ~27 % fewer instructions of
//! mu-sssp's layering on the complete DRAGONFLY(3) (docs/routing.md).
//!
//! A dependency `x → y` exists only when `y` leaves the switch `x` enters, so the edge slots of
//! `x` are the channels of that switch: slot `off[x] + (y − start[head(x)])`.

use crate::sssp::Channels;

/// Edge-slot layout shared by every VL's graph, and the in-channels of each switch.
pub(crate) struct Shape {
    /// First slot of channel `x`'s out-edges; `off[nchan]` = number of slots.
    off: Vec<u32>,
    /// First out-channel of the switch channel `x` enters.
    head_first: Vec<u32>,
    /// Channels entering switch `s`: `inc[istart[s]..istart[s + 1]]`.
    istart: Vec<u32>,
    inc: Vec<u32>,
    /// Switch each channel leaves.
    tail: Vec<u32>,
    /// First in-slot of channel `a` (its in-edges `p → a`, `p` entering `tail[a]`, in the
    /// order of [`Self::incoming`]); `ioff[nchan]` = number of in-slots.
    ioff: Vec<u32>,
    /// Index of channel `p` among the channels entering the switch it enters.
    inc_pos: Vec<u32>,
}

impl Shape {
    pub fn new(ch: &Channels, ns: usize) -> Self {
        let n = ch.len();
        let start: Vec<u32> = (0..=ns)
            .map(|s| if s < ns { ch.of_switch(s).start } else { n as u32 })
            .collect();
        let mut off = Vec::with_capacity(n + 1);
        let mut head_first = Vec::with_capacity(n);
        let mut acc = 0u32;
        for x in 0..n {
            let h = ch.remote[x] as usize;
            off.push(acc);
            head_first.push(start[h]);
            acc += start[h + 1] - start[h];
        }
        off.push(acc);
        let mut istart = vec![0u32; ns + 1];
        for &r in &ch.remote {
            istart[r as usize + 1] += 1;
        }
        for s in 0..ns {
            istart[s + 1] += istart[s];
        }
        let mut fill = istart.clone();
        let mut inc = vec![0u32; n];
        let mut inc_pos = vec![0u32; n];
        for (x, &r) in ch.remote.iter().enumerate() {
            inc[fill[r as usize] as usize] = x as u32;
            inc_pos[x] = fill[r as usize] - istart[r as usize];
            fill[r as usize] += 1;
        }
        let mut tail = vec![0u32; n];
        for s in 0..ns {
            tail[start[s] as usize..start[s + 1] as usize].fill(s as u32);
        }
        let mut ioff = Vec::with_capacity(n + 1);
        let mut acc = 0u32;
        for &t in &tail {
            ioff.push(acc);
            acc += istart[t as usize + 1] - istart[t as usize];
        }
        ioff.push(acc);
        Shape {
            off,
            head_first,
            istart,
            inc,
            tail,
            ioff,
            inc_pos,
        }
    }

    /// In-slot of edge `p → a` (`p` must enter the switch `a` leaves).
    fn in_slot(&self, p: u32, a: u32) -> usize {
        (self.ioff[a as usize] + self.inc_pos[p as usize]) as usize
    }

    /// Channels entering switch `s` (index).
    pub fn incoming(&self, s: usize) -> &[u32] {
        &self.inc[self.istart[s] as usize..self.istart[s + 1] as usize]
    }

    fn nodes(&self) -> usize {
        self.head_first.len()
    }

    /// Number of in-slots (the same edges, grouped by head channel).
    fn num_in_slots(&self) -> usize {
        *self.ioff.last().unwrap_or(&0) as usize
    }

    /// Number of edge slots.
    pub fn num_slots(&self) -> usize {
        *self.off.last().unwrap_or(&0) as usize
    }

    /// Slot of edge `x → y` (`y` must leave the switch `x` enters).
    pub fn slot(&self, x: u32, y: u32) -> usize {
        debug_assert!(y >= self.head_first[x as usize]);
        (self.off[x as usize] + y - self.head_first[x as usize]) as usize
    }

    /// Out-neighbour candidates of `x`: the channels of the switch it enters.
    fn outs(&self, x: u32) -> std::ops::Range<u32> {
        let f = self.head_first[x as usize];
        f..f + (self.off[x as usize + 1] - self.off[x as usize])
    }

    /// An order of the channels in which every edge of `present` (indexed by slot) that
    /// closes no cycle points forward: the reverse postorder of a depth-first search from
    /// each channel in index order (only the back edges of the search point backward).
    /// (Tests; the first fit uses [`Self::components`], the same order by component.)
    #[cfg(test)]
    pub fn forward_order(&self, present: &[bool]) -> Vec<u32> {
        let n = self.nodes();
        let mut seen = vec![false; n];
        let mut post = Vec::with_capacity(n);
        // (channel, next out-neighbour to look at)
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for r in 0..n as u32 {
            if seen[r as usize] {
                continue;
            }
            seen[r as usize] = true;
            stack.push((r, self.outs(r).start));
            while let Some(top) = stack.last_mut() {
                let (a, b) = *top;
                if b == self.outs(a).end {
                    post.push(a);
                    stack.pop();
                    continue;
                }
                top.1 = b + 1;
                if present[self.slot(a, b)] && !seen[b as usize] {
                    seen[b as usize] = true;
                    stack.push((b, self.outs(b).start));
                }
            }
        }
        post.reverse();
        post
    }

    /// The strongly connected components of the graph of `present` (indexed by slot): the
    /// component of every channel, and an order of the channels in which each component is
    /// contiguous and, inside it, in [`Self::forward_order`]'s relative order (so every
    /// present edge inside a component that closes no cycle points forward). A cycle of any
    /// subgraph lies inside one component: an edge between two components closes none, and
    /// a graph restricted to the edges inside components has the same cycles (Tarjan's
    /// algorithm with the depth-first search of [`Self::forward_order`]; 28 Nov 2026).
    pub fn components(&self, present: &[bool]) -> (Vec<u32>, Vec<u32>) {
        const UNSEEN: u32 = u32::MAX;
        let n = self.nodes();
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut comp = vec![0u32; n];
        let mut post = Vec::with_capacity(n);
        let mut open: Vec<u32> = Vec::new();
        let mut stack: Vec<(u32, u32)> = Vec::new();
        let (mut next, mut comps) = (0u32, 0u32);
        for r in 0..n as u32 {
            if index[r as usize] != UNSEEN {
                continue;
            }
            index[r as usize] = next;
            low[r as usize] = next;
            next += 1;
            open.push(r);
            on_stack[r as usize] = true;
            stack.push((r, self.outs(r).start));
            while let Some(top) = stack.last_mut() {
                let (a, b) = *top;
                if b == self.outs(a).end {
                    post.push(a);
                    stack.pop();
                    if low[a as usize] == index[a as usize] {
                        while let Some(v) = open.pop() {
                            on_stack[v as usize] = false;
                            comp[v as usize] = comps;
                            if v == a {
                                break;
                            }
                        }
                        comps += 1;
                    }
                    if let Some(&(p, _)) = stack.last() {
                        low[p as usize] = low[p as usize].min(low[a as usize]);
                    }
                    continue;
                }
                top.1 = b + 1;
                if !present[self.slot(a, b)] {
                    continue;
                }
                if index[b as usize] == UNSEEN {
                    index[b as usize] = next;
                    low[b as usize] = next;
                    next += 1;
                    open.push(b);
                    on_stack[b as usize] = true;
                    stack.push((b, self.outs(b).start));
                } else if on_stack[b as usize] {
                    low[a as usize] = low[a as usize].min(index[b as usize]);
                }
            }
        }
        // Reverse postorder, grouped by component (a stable counting sort).
        let mut first = vec![0u32; comps as usize + 1];
        for &a in &post {
            first[comp[a as usize] as usize + 1] += 1;
        }
        for i in 1..first.len() {
            first[i] += first[i - 1];
        }
        let mut order = vec![0u32; n];
        for &a in post.iter().rev() {
            let f = &mut first[comp[a as usize] as usize];
            order[*f as usize] = a;
            *f += 1;
        }
        (order, comp)
    }

    /// Switch a channel leaves.
    fn tail(&self, y: u32) -> usize {
        self.tail[y as usize] as usize
    }
}

/// Calls `f(i)` for every set bit `i` of `bits` in `lo..hi`, in increasing order; stops at
/// the first `f` returning true (and returns true).
#[inline]
fn any_bit(bits: &[u64], lo: usize, hi: usize, mut f: impl FnMut(usize) -> bool) -> bool {
    let mut w = lo / 64;
    while w * 64 < hi {
        let mut word = bits[w];
        if w == lo / 64 {
            word &= !0u64 << (lo % 64);
        }
        if (w + 1) * 64 > hi {
            word &= !0u64 >> ((w + 1) * 64 - hi);
        }
        while word != 0 {
            let i = w * 64 + word.trailing_zeros() as usize;
            if f(i) {
                return true;
            }
            word &= word - 1;
        }
        w += 1;
    }
    false
}

/// Scratch of the searches (shared by the graphs, which are used one at a time).
#[derive(Default)]
pub(crate) struct Scratch {
    mark: Vec<u32>,
    /// Marks of the backward search.
    mark_b: Vec<u32>,
    epoch: u32,
    stack: Vec<u32>,
    stack_b: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    pos: Vec<u32>,
}

/// One VL's CDG: reference counts per edge slot and a topological order of the channels.
#[derive(Clone)]
pub(crate) struct Cdg {
    refs: Vec<u32>,
    /// Bit per edge slot: present (`refs > 0`); the forward searches visit only these.
    out_bits: Vec<u64>,
    /// Bit per in-slot ([`Shape::in_slot`]): present; the backward searches visit only these.
    in_bits: Vec<u64>,
    /// Position of each channel in the topological order.
    ord: Vec<u32>,
    /// Channel at each position.
    at: Vec<u32>,
}

impl Cdg {
    pub fn new(shape: &Shape) -> Self {
        let n = shape.nodes();
        Cdg {
            refs: vec![0; *shape.off.last().unwrap_or(&0) as usize],
            out_bits: vec![0; shape.num_slots().div_ceil(64)],
            in_bits: vec![0; shape.num_in_slots().div_ceil(64)],
            ord: (0..n as u32).collect(),
            at: (0..n as u32).collect(),
        }
    }

    /// A graph without edges whose topological order starts as `order` (every channel once).
    /// Any order is one of the empty graph; an order in which most of the edges to come point
    /// forward ([`Shape::forward_order`]) spares [`Self::try_add`] most of its searches.
    pub fn with_order(shape: &Shape, order: &[u32]) -> Self {
        let n = shape.nodes();
        assert_eq!(order.len(), n, "an order of every channel");
        let mut ord = vec![0u32; n];
        for (p, &a) in order.iter().enumerate() {
            ord[a as usize] = p as u32;
        }
        Cdg {
            refs: vec![0; shape.num_slots()],
            out_bits: vec![0; shape.num_slots().div_ceil(64)],
            in_bits: vec![0; shape.num_in_slots().div_ceil(64)],
            ord,
            at: order.to_vec(),
        }
    }

    /// Whether edge `x → y` is present.
    pub fn has(&self, shape: &Shape, x: u32, y: u32) -> bool {
        self.refs[shape.slot(x, y)] > 0
    }

    /// Adds one reference to `x → y` if that keeps the graph acyclic (true), else leaves the
    /// graph unchanged (false).
    pub fn try_add(&mut self, shape: &Shape, sc: &mut Scratch, x: u32, y: u32) -> bool {
        let k = shape.slot(x, y);
        if self.refs[k] > 0 {
            self.refs[k] += 1;
            return true;
        }
        if self.ord[x as usize] < self.ord[y as usize] {
            self.link(shape, k, x, y);
            return true;
        }
        if x == y {
            return false;
        }
        let (lb, ub) = (self.ord[y as usize], self.ord[x as usize]);
        sc.next_epoch(shape.nodes());
        let ep = sc.epoch;
        // Forward from y (positions ≤ ub) and backward from x (positions ≥ lb), one node of
        // each in turn: a node reached by both closes a cycle (y reaches it, it reaches x),
        // found after about twice the shorter of the two searches. Without a cycle both
        // searches run to their end: the sets re-ordered below.
        sc.fwd.clear();
        sc.bwd.clear();
        sc.stack.clear();
        sc.stack_b.clear();
        sc.stack.push(y);
        sc.mark[y as usize] = ep;
        sc.stack_b.push(x);
        sc.mark_b[x as usize] = ep;
        loop {
            let f = sc.stack.pop();
            if let Some(a) = f {
                sc.fwd.push(a);
                let (lo, first) = (shape.off[a as usize] as usize, shape.head_first[a as usize] as usize);
                let hi = shape.off[a as usize + 1] as usize;
                let cycle = any_bit(&self.out_bits, lo, hi, |i| {
                    let b = (first + i - lo) as u32;
                    if sc.mark_b[b as usize] == ep {
                        return true;
                    }
                    if self.ord[b as usize] <= ub && sc.mark[b as usize] != ep {
                        sc.mark[b as usize] = ep;
                        sc.stack.push(b);
                    }
                    false
                });
                if cycle {
                    return false;
                }
            }
            let g = sc.stack_b.pop();
            if let Some(a) = g {
                sc.bwd.push(a);
                let inc = shape.incoming(shape.tail(a));
                let (lo, hi) = (shape.ioff[a as usize] as usize, shape.ioff[a as usize + 1] as usize);
                let cycle = any_bit(&self.in_bits, lo, hi, |i| {
                    let p = inc[i - lo];
                    if sc.mark[p as usize] == ep {
                        return true;
                    }
                    if self.ord[p as usize] >= lb && sc.mark_b[p as usize] != ep {
                        sc.mark_b[p as usize] = ep;
                        sc.stack_b.push(p);
                    }
                    false
                });
                if cycle {
                    return false;
                }
            }
            if f.is_none() && g.is_none() {
                break;
            }
        }
        // Re-order: the backward set, then the forward set, on their pooled positions. Both
        // sets sorted by position: by a scan of the positions `lb..=ub` (every node there
        // marked by a search is in its set) when that is short against sorting, else by
        // sorting each set and merging their positions. The same lists either way.
        let ord = &self.ord;
        sc.pos.clear();
        let moved = sc.fwd.len() + sc.bwd.len();
        if (ub - lb) as usize <= 16 * moved {
            sc.fwd.clear();
            sc.bwd.clear();
            for p in lb..=ub {
                let a = self.at[p as usize];
                if sc.mark[a as usize] == ep {
                    sc.fwd.push(a);
                    sc.pos.push(p);
                } else if sc.mark_b[a as usize] == ep {
                    sc.bwd.push(a);
                    sc.pos.push(p);
                }
            }
        } else {
            sc.bwd.sort_unstable_by_key(|&a| ord[a as usize]);
            sc.fwd.sort_unstable_by_key(|&a| ord[a as usize]);
            let (mut i, mut j) = (0, 0);
            while i < sc.bwd.len() || j < sc.fwd.len() {
                let pb = sc.bwd.get(i).map_or(u32::MAX, |&a| ord[a as usize]);
                let pf = sc.fwd.get(j).map_or(u32::MAX, |&a| ord[a as usize]);
                if pb < pf {
                    sc.pos.push(pb);
                    i += 1;
                } else {
                    sc.pos.push(pf);
                    j += 1;
                }
            }
        }
        for (i, &a) in sc.bwd.iter().chain(sc.fwd.iter()).enumerate() {
            let p = sc.pos[i];
            self.ord[a as usize] = p;
            self.at[p as usize] = a;
        }
        self.link(shape, k, x, y);
        true
    }

    /// Adds the first reference to `x → y` (slot `k`).
    fn link(&mut self, shape: &Shape, k: usize, x: u32, y: u32) {
        self.refs[k] = 1;
        self.out_bits[k / 64] |= 1 << (k % 64);
        let j = shape.in_slot(x, y);
        self.in_bits[j / 64] |= 1 << (j % 64);
    }

    /// Removes one reference to `x → y` (present).
    pub fn remove(&mut self, shape: &Shape, x: u32, y: u32) {
        let k = shape.slot(x, y);
        debug_assert!(self.refs[k] > 0);
        self.refs[k] = self.refs[k].saturating_sub(1);
        if self.refs[k] == 0 {
            self.out_bits[k / 64] &= !(1 << (k % 64));
            let j = shape.in_slot(x, y);
            self.in_bits[j / 64] &= !(1 << (j % 64));
        }
    }

    /// Whether the stored order is a topological order of the present edges.
    #[cfg(test)]
    pub fn order_ok(&self, shape: &Shape) -> bool {
        (0..shape.nodes() as u32).all(|a| {
            shape
                .outs(a)
                .all(|b| self.refs[shape.slot(a, b)] == 0 || self.ord[a as usize] < self.ord[b as usize])
        }) && self
            .at
            .iter()
            .enumerate()
            .all(|(p, &a)| self.ord[a as usize] == p as u32)
    }
}

impl Scratch {
    fn next_epoch(&mut self, n: usize) {
        if self.mark.len() != n {
            self.mark = vec![0; n];
            self.mark_b = vec![0; n];
            self.epoch = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.iter_mut().for_each(|m| *m = 0);
            self.mark_b.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
    }
}
