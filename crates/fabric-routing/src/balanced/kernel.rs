//! The balanced engine's kernel: the escape tree, one destination's routing tree grown on its
//! VL's CDG, and the rip-up-and-reroute rounds (see the module documentation of
//! [`super`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fabric_topology::Fabric;

use super::cdg::{Cdg, Scratch, Shape};
use super::plan::VlPlan;
use crate::sssp::Channels;

/// No channel.
pub(crate) const NONE: u32 = u32::MAX;

/// Rip-up-and-reroute rounds after the first routing of every destination.
pub const REROUTE_ROUNDS: usize = 3;

/// The result: the next channel of every switch towards every destination.
pub(crate) struct Routed {
    pub ch: Channels,
    /// `next[d × ns + s]`: channel `s` takes towards destination `d` ([`NONE`]: `s` is the
    /// destination's switch, or has no path).
    pub next: Vec<u32>,
    /// Destinations routed on the escape tree (stuck in every round they were routed).
    pub escaped: usize,
    /// Highest channel load (all-to-all routes crossing a switch-to-switch channel).
    pub max_load: u64,
}

/// The escape spanning forest (BFS from the lowest live switch of each component) and each
/// switch's component.
struct Forest {
    parent: Vec<u32>,
    /// Channel to the parent (`NONE` at a root).
    up: Vec<u32>,
    depth: Vec<u32>,
    comp: Vec<u32>,
    comp_size: Vec<u32>,
    /// Tree neighbours: (neighbour switch, channel to it), per switch.
    adj: Vec<Vec<(u32, u32)>>,
}

impl Forest {
    fn new(fabric: &Fabric, ch: &Channels) -> Self {
        let ns = fabric.num_switches();
        let mut f = Forest {
            parent: vec![NONE; ns],
            up: vec![NONE; ns],
            depth: vec![0; ns],
            comp: vec![NONE; ns],
            comp_size: Vec::new(),
            adj: vec![Vec::new(); ns],
        };
        let mut queue = Vec::new();
        for root in fabric.switch_ids().filter(|&s| fabric.switch(s).up) {
            let r = root.idx();
            if f.comp[r] != NONE {
                continue;
            }
            let c = f.comp_size.len() as u32;
            f.comp[r] = c;
            queue.clear();
            queue.push(r as u32);
            let mut head = 0;
            while head < queue.len() {
                let a = queue[head] as usize;
                head += 1;
                for x in ch.of_switch(a) {
                    let b = ch.remote[x as usize] as usize;
                    if f.comp[b] == NONE {
                        f.comp[b] = c;
                        f.parent[b] = a as u32;
                        f.depth[b] = f.depth[a] + 1;
                        queue.push(b as u32);
                    }
                }
            }
            f.comp_size.push(queue.len() as u32);
        }
        // Tree channels: the first channel of each child to its parent and back.
        for b in 0..ns {
            let a = f.parent[b];
            if a == NONE {
                continue;
            }
            let to_a = ch.of_switch(b).find(|&x| ch.remote[x as usize] == a);
            let to_b = ch.of_switch(a as usize).find(|&x| ch.remote[x as usize] as usize == b);
            if let (Some(u), Some(d)) = (to_a, to_b) {
                f.up[b] = u;
                f.adj[b].push((a, u));
                f.adj[a as usize].push((b as u32, d));
            }
        }
        f
    }

    /// Every turn of a tree path (up→up, up→down to another child, down→down): acyclic, as
    /// up channels come before down channels and depth orders each kind.
    fn turns(&self) -> Vec<(u32, u32)> {
        let mut t = Vec::new();
        for (b, &u) in self.up.iter().enumerate() {
            if u == NONE {
                continue;
            }
            let a = self.parent[b] as usize;
            for &(n, x) in &self.adj[a] {
                if n as usize != b {
                    // up (b→a) then up (a→parent) or down (a→other child).
                    t.push((u, x));
                }
            }
            // down (a→b) then down (b→child).
            if let Some(&(_, d)) = self.adj[a].iter().find(|&&(n, _)| n as usize == b) {
                for &(n, x) in &self.adj[b] {
                    if n != a as u32 {
                        t.push((d, x));
                    }
                }
            }
        }
        t
    }
}

/// State of the routing: channels, shape, one CDG per VL, loads, the trees.
struct State<'a> {
    fabric: &'a Fabric,
    plan: &'a VlPlan,
    ch: Channels,
    shape: Shape,
    cdg: Vec<Cdg>,
    sc: Scratch,
    load: Vec<u64>,
    next: Vec<u32>,
    escaped: Vec<bool>,
    /// The escape tree's turns alone (the CDG a VL restarts from when it gets pinned).
    pinned_base: Cdg,
    /// Whether a VL's CDG holds the escape tree's turns (after a destination got stuck in it).
    pinned: Vec<bool>,
    /// Whether a destination is routed.
    routed: Vec<bool>,
    forest: Forest,
    own: Vec<u64>,
    // Per-destination scratch.
    heap: BinaryHeap<Reverse<(u32, u64, u32)>>,
    settled: Vec<bool>,
    order: Vec<u32>,
    /// Switch each channel leaves.
    tail: Vec<u32>,
}

/// Routes every destination of `plan` (see [`super`]): first pass, then
/// [`REROUTE_ROUNDS`] rip-up-and-reroute rounds, keeping the state of least (max load, total
/// load).
pub(crate) fn route(fabric: &Fabric, plan: &VlPlan) -> Routed {
    let ns = fabric.num_switches();
    let ch = Channels::new(fabric);
    let shape = Shape::new(&ch, ns);
    let forest = Forest::new(fabric, &ch);
    let mut base = Cdg::new(&shape);
    let mut sc = Scratch::default();
    for (x, y) in forest.turns() {
        let ok = base.try_add(&shape, &mut sc, x, y);
        debug_assert!(ok, "tree turns are acyclic");
    }
    let nd = plan.dests.len();
    let nv = usize::from(plan.vls.max(1));
    let mut st = State {
        fabric,
        plan,
        cdg: vec![Cdg::new(&shape); nv],
        pinned_base: base,
        pinned: vec![false; nv],
        routed: vec![false; nd],
        shape,
        sc,
        load: vec![0; ch.len()],
        next: vec![NONE; nd * ns],
        escaped: vec![false; nd],
        forest,
        own: fabric
            .switch_ids()
            .map(|s| fabric.attached_end_ports(s).len() as u64)
            .collect(),
        heap: BinaryHeap::new(),
        settled: vec![false; ns],
        order: Vec::new(),
        tail: (0..ns as u32)
            .flat_map(|s| ch.of_switch(s as usize).map(move |_| s))
            .collect(),
        ch,
    };
    for d in 0..nd {
        st.place(d);
    }
    let mut best = (st.score(), st.next.clone(), st.escaped.clone());
    for _ in 0..REROUTE_ROUNDS {
        for d in 0..nd {
            st.unroute_dest(d);
            st.place(d);
        }
        let s = st.score();
        if s < best.0 {
            best = (s, st.next.clone(), st.escaped.clone());
        }
    }
    Routed {
        ch: st.ch,
        next: best.1,
        escaped: best.2.iter().filter(|&&e| e).count(),
        max_load: best.0 .0,
    }
}

impl State<'_> {
    fn ns(&self) -> usize {
        self.fabric.num_switches()
    }

    /// (highest channel load, total load).
    fn score(&self) -> (u64, u64) {
        (self.load.iter().copied().max().unwrap_or(0), self.load.iter().sum())
    }

    /// Adds (`sign` true) or removes the loads of destination `d`'s tree: each channel gets the
    /// number of source end ports whose route crosses it (times the destination's weight).
    fn charge(&mut self, d: usize, add: bool) {
        let ns = self.ns();
        let w = self.plan.dests[d].weight;
        if w == 0 {
            return;
        }
        let next = &self.next[d * ns..(d + 1) * ns];
        for s in 0..ns {
            let f = self.own[s] * w;
            if f == 0 {
                continue;
            }
            let mut x = next[s];
            let mut hops = 0;
            while x != NONE && hops <= ns {
                if add {
                    self.load[x as usize] += f;
                } else {
                    self.load[x as usize] -= f;
                }
                x = next[self.ch.remote[x as usize] as usize];
                hops += 1;
            }
        }
    }

    /// Routes destination `d`; if it is stuck in its VL (no legal tree, and the escape tree's
    /// dependencies do not fit an unpinned VL), the VL is pinned: its destinations are
    /// withdrawn, its CDG restarts from the escape tree's turns, and its destinations routed so
    /// far and `d` are routed again (in a pinned VL a destination always has its escape tree).
    fn place(&mut self, d: usize) {
        if self.route_dest(d) {
            return;
        }
        let vl = self.plan.dests[d].vl;
        let redo: Vec<usize> = (0..self.plan.dests.len())
            .filter(|&e| self.plan.dests[e].vl == vl && (self.routed[e] || e == d))
            .collect();
        for &e in &redo {
            if self.routed[e] {
                self.unroute_dest(e);
            }
        }
        let v = usize::from(vl);
        self.cdg[v] = self.pinned_base.clone();
        self.pinned[v] = true;
        for &e in &redo {
            let ok = self.route_dest(e);
            debug_assert!(ok, "a pinned VL always has the escape tree");
        }
    }

    /// Removes destination `d`'s loads and dependencies.
    fn unroute_dest(&mut self, d: usize) {
        self.routed[d] = false;
        self.charge(d, false);
        self.withdraw(d);
    }

    /// Removes destination `d`'s dependencies and next hops.
    fn withdraw(&mut self, d: usize) {
        let ns = self.ns();
        let vl = usize::from(self.plan.dests[d].vl);
        for s in 0..ns {
            let x = self.next[d * ns + s];
            if x == NONE {
                continue;
            }
            let y = self.next[d * ns + self.ch.remote[x as usize] as usize];
            if y != NONE {
                self.cdg[vl].remove(&self.shape, x, y);
            }
        }
        self.next[d * ns..(d + 1) * ns].fill(NONE);
    }

    /// Routes destination `d` on its VL: the tree grown from its switch, closest switches
    /// first (fewest hops, then least path load), each switch taking the first candidate
    /// whose dependency keeps the VL's CDG acyclic; when a switch of the component is left
    /// without a legal candidate, the destination is routed on the escape tree instead.
    fn route_dest(&mut self, d: usize) -> bool {
        let ns = self.ns();
        let dest = self.plan.dests[d];
        let t = dest.switch as usize;
        let vl = usize::from(dest.vl);
        self.settled.fill(false);
        self.heap.clear();
        self.order.clear();
        self.settled[t] = true;
        self.order.push(t as u32);
        for &x in self.shape.incoming(t) {
            self.heap.push(Reverse((1, self.load[x as usize], x)));
        }
        let base = d * ns;
        while let Some(Reverse((len, cost, x))) = self.heap.pop() {
            let u = self.ch_tail(x);
            if self.settled[u] {
                continue;
            }
            let v = self.ch.remote[x as usize] as usize;
            if v != t {
                let y = self.next[base + v];
                if !self.cdg[vl].try_add(&self.shape, &mut self.sc, x, y) {
                    continue;
                }
            }
            self.settled[u] = true;
            self.next[base + u] = x;
            self.order.push(u as u32);
            for &p in self.shape.incoming(u) {
                let a = self.ch_tail(p);
                if !self.settled[a] {
                    self.heap.push(Reverse((len + 1, cost + self.load[p as usize], p)));
                }
            }
        }
        let comp = self.forest.comp[t];
        if comp != NONE && self.order.len() < self.forest.comp_size[comp as usize] as usize {
            self.withdraw(d);
            if !self.route_on_tree(d) {
                self.withdraw(d);
                return false;
            }
            self.escaped[d] = true;
        } else {
            self.escaped[d] = false;
        }
        self.charge(d, true);
        self.routed[d] = true;
        true
    }

    /// Destination `d` on the escape tree: every switch of its component forwards along the
    /// tree path. Its dependencies are tree turns: always legal in a pinned VL; in an unpinned
    /// one false when one of them would close a cycle (the partial tree is left for
    /// [`State::withdraw`]).
    fn route_on_tree(&mut self, d: usize) -> bool {
        let ns = self.ns();
        let t = self.plan.dests[d].switch as usize;
        let vl = usize::from(self.plan.dests[d].vl);
        let base = d * ns;
        self.order.clear();
        self.order.push(t as u32);
        self.settled.fill(false);
        self.settled[t] = true;
        let mut head = 0;
        while head < self.order.len() {
            let a = self.order[head] as usize;
            head += 1;
            for i in 0..self.forest.adj[a].len() {
                let (b, _) = self.forest.adj[a][i];
                let b = b as usize;
                if self.settled[b] {
                    continue;
                }
                // b's channel to a: the tree channel (up if a is b's parent, else a's down).
                let x = match self.forest.adj[b].iter().find(|&&(n, _)| n as usize == a) {
                    Some(&(_, x)) => x,
                    None => continue,
                };
                if a != t {
                    let y = self.next[base + a];
                    if !self.cdg[vl].try_add(&self.shape, &mut self.sc, x, y) {
                        debug_assert!(!self.pinned[vl], "tree turns are in a pinned VL");
                        return false;
                    }
                }
                self.settled[b] = true;
                self.next[base + b] = x;
                self.order.push(b as u32);
            }
        }
        true
    }

    fn ch_tail(&self, x: u32) -> usize {
        self.tail[x as usize] as usize
    }
}

/// Routes (switch, destination) longer than the minimal hop count of the live switch graph.
pub(crate) fn longer_than_minimal(fabric: &Fabric, plan: &VlPlan, r: &Routed) -> usize {
    let ns = fabric.num_switches();
    let mut dist = vec![u32::MAX; ns];
    let mut queue = Vec::new();
    let mut n = 0;
    for (d, dest) in plan.dests.iter().enumerate() {
        let t = dest.switch as usize;
        dist.fill(u32::MAX);
        dist[t] = 0;
        queue.clear();
        queue.push(t);
        let mut head = 0;
        while head < queue.len() {
            let a = queue[head];
            head += 1;
            for x in r.ch.of_switch(a) {
                let b = r.ch.remote[x as usize] as usize;
                if dist[b] == u32::MAX {
                    dist[b] = dist[a] + 1;
                    queue.push(b);
                }
            }
        }
        let next = &r.next[d * ns..(d + 1) * ns];
        for (s, &ds) in dist.iter().enumerate() {
            let (mut c, mut k) = (s, 0u32);
            while next[c] != NONE && k <= ns as u32 {
                c = r.ch.remote[next[c] as usize] as usize;
                k += 1;
            }
            if c == t && k > ds {
                n += 1;
            }
        }
    }
    n
}
