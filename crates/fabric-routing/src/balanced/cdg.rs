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
//! A dependency `x → y` exists only when `y` leaves the switch `x` enters, so the edge slots of
//! `x` are the channels of that switch: slot `off[x] + (y − start[head(x)])`.

use crate::sssp::Channels;

/// Edge-slot layout shared by every VL's graph, and the in-channels of each switch.
pub(crate) struct Shape {
    /// First slot of channel `x`'s out-edges; `off[nchan]` = number of slots.
    off: Vec<u32>,
    /// First out-channel of the switch channel `x` enters.
    head_first: Vec<u32>,
    /// Channel ranges per switch (`start[s]..start[s + 1]`).
    start: Vec<u32>,
    /// Channels entering switch `s`: `inc[istart[s]..istart[s + 1]]`.
    istart: Vec<u32>,
    inc: Vec<u32>,
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
        for (x, &r) in ch.remote.iter().enumerate() {
            inc[fill[r as usize] as usize] = x as u32;
            fill[r as usize] += 1;
        }
        Shape {
            off,
            head_first,
            start,
            istart,
            inc,
        }
    }

    /// Channels entering switch `s` (index).
    pub fn incoming(&self, s: usize) -> &[u32] {
        &self.inc[self.istart[s] as usize..self.istart[s + 1] as usize]
    }

    fn nodes(&self) -> usize {
        self.head_first.len()
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

    /// Switch a channel leaves (by binary search on `start`).
    fn tail(&self, y: u32) -> usize {
        self.start.partition_point(|&s| s <= y) - 1
    }
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
        if self.refs[k] > 0 || self.ord[x as usize] < self.ord[y as usize] {
            self.refs[k] += 1;
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
                for b in shape.outs(a) {
                    if self.refs[shape.slot(a, b)] == 0 {
                        continue;
                    }
                    if sc.mark_b[b as usize] == ep {
                        return false;
                    }
                    let ob = self.ord[b as usize];
                    if ob <= ub && sc.mark[b as usize] != ep {
                        sc.mark[b as usize] = ep;
                        sc.stack.push(b);
                    }
                }
            }
            let g = sc.stack_b.pop();
            if let Some(a) = g {
                sc.bwd.push(a);
                let s = shape.tail(a);
                for &p in shape.incoming(s) {
                    if self.refs[shape.slot(p, a)] == 0 {
                        continue;
                    }
                    if sc.mark[p as usize] == ep {
                        return false;
                    }
                    let op = self.ord[p as usize];
                    if op >= lb && sc.mark_b[p as usize] != ep {
                        sc.mark_b[p as usize] = ep;
                        sc.stack_b.push(p);
                    }
                }
            }
            if f.is_none() && g.is_none() {
                break;
            }
        }
        // Re-order: the backward set, then the forward set, on their pooled positions.
        let ord = &self.ord;
        sc.bwd.sort_unstable_by_key(|&a| ord[a as usize]);
        sc.fwd.sort_unstable_by_key(|&a| ord[a as usize]);
        sc.pos.clear();
        sc.pos
            .extend(sc.bwd.iter().chain(sc.fwd.iter()).map(|&a| ord[a as usize]));
        sc.pos.sort_unstable();
        for (i, &a) in sc.bwd.iter().chain(sc.fwd.iter()).enumerate() {
            let p = sc.pos[i];
            self.ord[a as usize] = p;
            self.at[p as usize] = a;
        }
        self.refs[k] += 1;
        true
    }

    /// Removes one reference to `x → y` (present).
    pub fn remove(&mut self, shape: &Shape, x: u32, y: u32) {
        let k = shape.slot(x, y);
        debug_assert!(self.refs[k] > 0);
        self.refs[k] = self.refs[k].saturating_sub(1);
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
