//! The mu-sssp kernel: per directed channel the distinct source switches and destination
//! end ports crossing it, the port-order first pass, and the rip-up-and-reroute rounds that
//! grow one destination's tree outwards on minimal next hops by the least resulting
//! `min(sources, destinations)` (see the module documentation of [`super`]).

use fabric_topology::Fabric;

use crate::balanced::VlPlan;
use crate::sssp::Channels;

/// No channel / unreached.
pub(crate) const NONE: u32 = u32::MAX;

/// Rip-up-and-reroute rounds after the first routing of every destination. Two since 28–29
/// Nov 2026 (four before): on the 12 files no third round lowered mu — DRAGONFLY(3)
/// 1 % cut: 66 → 59 → 57 → 57 (the third re-routed every destination for fewer channels at
/// 57), 5 %: 69 → 69 → 63 → 63; the other files stopped within two — and the candidates
/// compete on mu (the installed layers, mu_rp median and mu_a2a of all 12 unchanged; the
/// rounds ~45 % cheaper on DRAGONFLY(3) 1 %, docs/routing.md).
pub const MU_ROUNDS: usize = 2;

/// Largest `channels × switches` the per-channel source counters may take (64 Mi counters,
/// 256 MB): beyond it the engine refuses the fabric (it is meant for direct topologies of a
/// few hundred switches).
pub const MU_MAX_COUNTERS: usize = 1 << 26;

/// Most destinations the engine routes (its per-switch, per-channel counters are `u16`).
pub const MU_MAX_DESTINATIONS: usize = u16::MAX as usize;

/// The result: the next channel of every switch towards every destination.
pub(crate) struct Routed {
    pub ch: Channels,
    /// `next[d × ns + s]`: channel `s` takes towards destination `d` ([`NONE`]: `s` is the
    /// destination's switch, or has no path). Empty when round 0 (the seed) is kept.
    pub next: Vec<u32>,
    /// The all-to-all `mu` of the kept routing: max over channels of min(source end ports,
    /// destination end ports) crossing it.
    pub mu: u64,
    /// The round whose routing was kept (0: the first pass).
    pub round: usize,
    /// Rip-up rounds run.
    pub rounds_run: usize,
    /// Destinations re-routed by the rounds (a destination once per round it was re-routed).
    pub rerouted: usize,
}

/// Cost of a candidate path for one source switch, compared lexicographically: highest
/// min(S, T) on the path (raised to the routing's mu so far: below it all paths are equal),
/// increase of Σ min(S, T), highest load, channel.
type Key = (u64, u64, u64, u32);

struct State<'a> {
    plan: &'a VlPlan,
    ns: usize,
    ch: Channels,
    /// End ports of each switch (its weight as a source).
    own: Vec<u64>,
    nc: usize,
    /// `src_cnt[s × nc + c]`: destinations whose route from switch `s` crosses channel `c`
    /// (a switch's counters together: its candidate paths are evaluated and charged at once;
    /// `u16`: at most [`MU_MAX_DESTINATIONS`], half the cache footprint of `u32`).
    src_cnt: Vec<u16>,
    /// Per channel: end ports of the distinct source switches crossing it.
    sw: Vec<u64>,
    /// Per channel: distinct destination end ports crossing it (from a source with end ports).
    tw: Vec<u64>,
    /// Per channel: routes (source end port, destination end port) crossing it.
    load: Vec<u64>,
    next: Vec<u32>,
    /// `dist[t × ns + u]`: hops from `u` to switch `t`; `order[t × ns ..][..reached[t]]`: the
    /// switches reaching `t` in BFS order (computed once per destination switch).
    dist: Vec<u32>,
    order: Vec<u32>,
    reached: Vec<u32>,
    /// `mark[c] == epoch`: the current destination's tree already counts in `tw[c]`.
    mark: Vec<u32>,
    epoch: u32,
    marked: Vec<u32>,
    /// mu of the routing so far (at the start of a round: of the whole routing).
    gmu: u64,
}

/// Routes every destination of `plan`: a first pass that loads the `seed` routing's next hops
/// (`seed[d × ns + s]` as [`Routed::next`]); then, if `more(mu of the seed)` gives a lower
/// bound of mu (`None`: no rounds), up to `rounds` rounds that rip up each destination and
/// route it again against all the others, stopping after a round that lowers neither mu nor
/// the channels at mu, or that reaches the bound. The routing of least (mu, channels at mu,
/// sum of min(src, dst), max load) is kept.
pub(crate) fn route(
    fabric: &Fabric,
    plan: &VlPlan,
    ch: Channels,
    seed: &[u32],
    rounds: usize,
    more: impl FnOnce(u64) -> Option<u64>,
) -> Routed {
    let ns = fabric.num_switches();
    let nc = ch.len();
    let nd = plan.dests.len();
    assert!(nd <= MU_MAX_DESTINATIONS, "mu-sssp: {nd} destinations");
    let mut st = State {
        plan,
        ns,
        own: fabric
            .switch_ids()
            .map(|s| {
                if fabric.switch(s).up {
                    fabric.attached_end_ports(s).len() as u64
                } else {
                    0
                }
            })
            .collect(),
        nc,
        src_cnt: vec![0; nc * ns],
        sw: vec![0; nc],
        tw: vec![0; nc],
        load: vec![0; nc],
        next: vec![NONE; nd * ns],
        dist: vec![NONE; ns * ns],
        order: vec![0; ns * ns],
        reached: vec![NONE; ns],
        mark: vec![0; nc],
        epoch: 0,
        marked: Vec::new(),
        gmu: 0,
        ch,
    };
    let order = dest_order(plan);
    // The seed's counters, loaded once per run of destinations of one switch with the same
    // next hops (port order's: all end ports of a switch; the counters are sums, so the
    // order does not matter and they equal those loaded one destination at a time).
    let mut d = 0;
    while d < nd {
        let row = &seed[d * ns..(d + 1) * ns];
        let mut e = d + 1;
        while e < nd && plan.dests[e].switch == plan.dests[d].switch && seed[e * ns..(e + 1) * ns] == *row {
            e += 1;
        }
        st.load_dests(d, e, row);
        d = e;
    }
    let s0 = st.score();
    let floor = more(s0.0);
    let rounds = if floor.is_some() { rounds } else { 0 };
    let mut best = (s0, if rounds > 0 { st.next.clone() } else { Vec::new() }, 0usize);
    let mut prev = s0;
    let mut rounds_run = 0;
    let mut rerouted = 0;
    for round in 1..=rounds {
        rounds_run = round;
        st.gmu = st.score().0;
        // Round 1 re-routes every destination; the later ones only those on the channels
        // at mu (measured 28 Nov 2026: on the cut files the rounds after the first re-routed 10–40 % of them
        // while mu had several channels at it, every one once it had many; with only those
        // from round 1 on, SLIMFLY(5;4) 5 % ended at mu 32 instead of 28).
        let hot = if round == 1 {
            order.clone()
        } else {
            st.hot_dests(&order)
        };
        rerouted += hot.len();
        for &d in &hot {
            st.unroute_dest(d);
            st.route_dest(d);
        }
        let s = st.score();
        if s < best.0 {
            best = (s, st.next.clone(), round);
        }
        // A round that lowers neither mu nor the channels at mu ends the rounds; from round 2
        // on, one that does not lower mu does too (measured 28 Nov 2026: on the cut files no round
        // after such a round lowered mu — after round 1 one did, DRAGONFLY(3) 5 %: 69, 69,
        // 63; the candidates compete on mu).
        // A round that reaches the lower bound of mu ends them too: no later one can lower
        // mu, and the candidates compete on mu.
        if (s.0, s.1) >= (prev.0, prev.1) || (round >= 2 && s.0 >= prev.0) || floor.is_some_and(|lb| s.0 <= lb) {
            break;
        }
        prev = s;
    }
    Routed {
        ch: st.ch,
        next: best.1,
        mu: best.0 .0,
        round: best.2,
        rounds_run,
        rerouted,
    }
}

/// The order destinations are routed in: end port `i` of every switch before end port
/// `i + 1` of any (the end ports of one switch are routed apart, so each sees the others'
/// trees as load), switch LIDs without end ports last.
fn dest_order(plan: &VlPlan) -> Vec<usize> {
    let mut rank = vec![0u32; plan.dests.len()];
    let mut prev = u32::MAX;
    let mut i = 0u32;
    for (d, dest) in plan.dests.iter().enumerate() {
        if dest.switch != prev {
            prev = dest.switch;
            i = 0;
        }
        rank[d] = if dest.weight == 0 { u32::MAX } else { i };
        i += 1;
    }
    let mut order: Vec<usize> = (0..plan.dests.len()).collect();
    order.sort_by_key(|&d| (rank[d], d));
    order
}

impl State<'_> {
    /// (mu, channels at mu, Σ min(src, dst), max load): the all-to-all congestion, then how
    /// many channels reach it, then how close the others are.
    fn score(&self) -> (u64, u64, u64, u64) {
        let mut mu = 0;
        let mut at = 0;
        let mut sum = 0;
        for c in 0..self.sw.len() {
            let v = self.sw[c].min(self.tw[c]);
            sum += v;
            match v.cmp(&mu) {
                std::cmp::Ordering::Greater => {
                    mu = v;
                    at = 1;
                }
                std::cmp::Ordering::Equal => at += 1,
                std::cmp::Ordering::Less => {}
            }
        }
        (mu, at, sum, self.load.iter().copied().max().unwrap_or(0))
    }

    /// The destinations (in `order`) whose tree takes a channel at the routing's mu
    /// (`gmu`, at the start of a round): only they can lower the min(S, T) of those channels by going
    /// elsewhere, so a round re-routes only them.
    fn hot_dests(&self, order: &[usize]) -> Vec<usize> {
        let hot: Vec<bool> = (0..self.nc).map(|c| self.sw[c].min(self.tw[c]) >= self.gmu).collect();
        let ns = self.ns;
        order
            .iter()
            .copied()
            .filter(|&d| {
                self.next[d * ns..(d + 1) * ns]
                    .iter()
                    .any(|&c| c != NONE && hot[c as usize])
            })
            .collect()
    }

    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.epoch = 1;
        }
    }

    /// Hop distances to switch `t` (links are bidirectional) and the switches in BFS order,
    /// once per switch.
    fn bfs(&mut self, t: usize) {
        if self.reached[t] != NONE {
            return;
        }
        let ns = self.ns;
        let dist = &mut self.dist[t * ns..(t + 1) * ns];
        let order = &mut self.order[t * ns..(t + 1) * ns];
        dist[t] = 0;
        order[0] = t as u32;
        let (mut i, mut n) = (0, 1);
        while i < n {
            let x = order[i] as usize;
            i += 1;
            for c in self.ch.of_switch(x) {
                let y = self.ch.remote[c as usize] as usize;
                if dist[y] == NONE {
                    dist[y] = dist[x] + 1;
                    order[n] = y as u32;
                    n += 1;
                }
            }
        }
        self.reached[t] = n as u32;
    }

    /// Cost of switch `u` taking channel `c` towards destination `d` (whose tree beyond
    /// `c` is already fixed): (highest min(src, dst) on the path once `u`'s end ports and
    /// `d` cross it, total increase of min(src, dst), highest load, channel).
    #[inline(always)]
    fn eval(&self, d: usize, u: usize, c: u32) -> Key {
        let ns = self.ns;
        let t = self.plan.dests[d].switch as usize;
        let w = self.own[u].max(1);
        let wd = self.plan.dests[d].weight;
        let (mut mx, mut inc, mut ld) = (0u64, 0u64, 0u64);
        let mut e = c as usize;
        for _ in 0..ns {
            let s_new = self.sw[e] + if self.src_cnt[u * self.nc + e] == 0 { w } else { 0 };
            let t_new = self.tw[e] + if self.mark[e] != self.epoch { wd } else { 0 };
            let v = s_new.min(t_new);
            mx = mx.max(v);
            inc += v - self.sw[e].min(self.tw[e]);
            ld = ld.max(self.load[e] + w * wd);
            let x = self.ch.remote[e] as usize;
            if x == t {
                break;
            }
            match self.next[d * ns + x] {
                NONE => break,
                n => e = n as usize,
            }
        }
        (mx.max(self.gmu), inc, ld, c)
    }

    /// Adds switch `u`'s end ports as sources on its path towards `d`; returns the highest
    /// min(src, dst) on the path afterwards (what [`Self::eval`] of that channel gave before,
    /// below `gmu`'s raise; 0 when `u` has no end ports).
    fn charge_path(&mut self, d: usize, u: usize) -> u64 {
        self.charge_path_n(d, u, 1, self.plan.dests[d].weight)
    }

    /// [`Self::charge_path`] for `m` destinations of `d`'s switch with `d`'s next hops and
    /// weights summing to `wd` at once (same counters as one at a time).
    #[inline(always)]
    fn charge_path_n(&mut self, d: usize, u: usize, m: u16, wd: u64) -> u64 {
        let ns = self.ns;
        let w = self.own[u];
        if w == 0 {
            return 0;
        }
        let mut mx = 0u64;
        let t = self.plan.dests[d].switch as usize;
        let mut e = self.next[d * ns + u];
        for _ in 0..ns {
            if e == NONE {
                break;
            }
            let c = e as usize;
            let k = &mut self.src_cnt[u * self.nc + c];
            if *k == 0 {
                self.sw[c] += w;
            }
            *k += m;
            self.load[c] += w * wd;
            if self.mark[c] != self.epoch {
                self.mark[c] = self.epoch;
                self.tw[c] += wd;
            }
            mx = mx.max(self.sw[c].min(self.tw[c]));
            let x = self.ch.remote[c] as usize;
            if x == t {
                break;
            }
            e = self.next[d * ns + x];
        }
        mx
    }

    /// Routes destination `d`: the switches in BFS order from its switch, each taking the
    /// minimal next hop of least [`Self::eval`], then charging its path. A switch with end
    /// ports and a single minimal next hop takes it without [`Self::eval`] (most switches
    /// of a Slim Fly or Dragonfly: their minimal paths are mostly unique): charging its path
    /// gives the value `eval` would have raised `gmu` to (same tables; 28 Nov 2026, H27).
    fn route_dest(&mut self, d: usize) {
        let ns = self.ns;
        let t = self.plan.dests[d].switch as usize;
        self.bfs(t);
        self.next_epoch();
        let base = t * ns;
        for i in 1..self.reached[t] as usize {
            let u = self.order[base + i] as usize;
            let du = self.dist[base + u];
            // With end ports: the first candidate is evaluated only once a second shows up.
            let lazy = self.own[u] > 0;
            let mut first = NONE;
            let mut best: Option<Key> = None;
            for c in self.ch.of_switch(u) {
                let v = self.ch.remote[c as usize] as usize;
                if self.dist[base + v] != du - 1 {
                    continue;
                }
                if lazy && first == NONE {
                    first = c;
                    continue;
                }
                if lazy && best.is_none() {
                    best = Some(self.eval(d, u, first));
                }
                let k = self.eval(d, u, c);
                if best.is_none_or(|b| k < b) {
                    best = Some(k);
                }
            }
            self.next[d * ns + u] = best.map_or(first, |k| k.3);
            let mx = self.charge_path(d, u);
            if lazy {
                self.gmu = self.gmu.max(mx);
            } else if let Some(k) = best {
                self.gmu = self.gmu.max(k.0);
            }
        }
    }

    /// Sets destination `d`'s next hops to `next` (a row of [`Routed::next`]) and counts them.
    /// Sets destinations `d..e` (of one switch) to the same next hops `next` (a row of
    /// [`Routed::next`]) and counts them.
    fn load_dests(&mut self, d: usize, e: usize, next: &[u32]) {
        let ns = self.ns;
        let t = self.plan.dests[d].switch as usize;
        let wd = self.plan.dests[d..e].iter().map(|x| x.weight).sum();
        self.next_epoch();
        for x in d..e {
            self.next[x * ns..(x + 1) * ns].copy_from_slice(next);
        }
        for (u, &c) in next.iter().enumerate() {
            if u != t && c != NONE {
                self.charge_path_n(d, u, (e - d) as u16, wd);
            }
        }
    }

    /// Removes destination `d`'s counts and next hops.
    fn unroute_dest(&mut self, d: usize) {
        let ns = self.ns;
        let t = self.plan.dests[d].switch as usize;
        let wd = self.plan.dests[d].weight;
        self.next_epoch();
        self.marked.clear();
        for u in 0..ns {
            let w = self.own[u];
            let mut e = self.next[d * ns + u];
            if w == 0 {
                continue;
            }
            for _ in 0..ns {
                if e == NONE {
                    break;
                }
                let c = e as usize;
                let k = &mut self.src_cnt[u * self.nc + c];
                *k -= 1;
                if *k == 0 {
                    self.sw[c] -= w;
                }
                self.load[c] -= w * wd;
                if self.mark[c] != self.epoch {
                    self.mark[c] = self.epoch;
                    self.marked.push(c as u32);
                }
                let x = self.ch.remote[c] as usize;
                if x == t {
                    break;
                }
                e = self.next[d * ns + x];
            }
        }
        for &c in &self.marked {
            self.tw[c as usize] -= wd;
        }
        self.next[d * ns..(d + 1) * ns].fill(NONE);
    }
}

/// Minimal routing by port order: every switch takes, towards each destination, its
/// lowest-numbered port to a switch one hop closer (the choice of OpenSM's lash, and
/// dimension order on a HyperX cabled dimension by dimension). Same layout as
/// [`Routed::next`].
pub(crate) fn port_order(fabric: &Fabric, plan: &VlPlan, ch: &Channels) -> Vec<u32> {
    let ns = fabric.num_switches();
    let nd = plan.dests.len();
    let mut next = vec![NONE; nd * ns];
    let mut dist = vec![NONE; ns];
    let mut queue: Vec<u32> = Vec::with_capacity(ns);
    let mut row = vec![NONE; ns];
    let mut prev_t = usize::MAX;
    for d in 0..nd {
        let t = plan.dests[d].switch as usize;
        if t != prev_t {
            prev_t = t;
            ch.hops_from(t, &mut dist, &mut queue);
            for u in 0..ns {
                row[u] = if u == t || dist[u] == NONE {
                    NONE
                } else {
                    ch.of_switch(u)
                        .filter(|&c| dist[ch.remote[c as usize] as usize] == dist[u] - 1)
                        .min_by_key(|&c| (ch.port[c as usize], c))
                        .unwrap_or(NONE)
                };
            }
        }
        next[d * ns..(d + 1) * ns].copy_from_slice(&row);
    }
    next
}

/// Per switch (index): its end ports, 0 for a switch that is down.
pub(crate) fn end_ports_per_switch(fabric: &Fabric) -> Vec<u64> {
    fabric
        .switch_ids()
        .map(|s| {
            if fabric.switch(s).up {
                fabric.attached_end_ports(s).len() as u64
            } else {
                0
            }
        })
        .collect()
}

/// A lower bound of the all-to-all `mu` of every minimal routing (every routing the rounds
/// can reach) from **forced channels**: a channel that every minimal path from switch `a`
/// (with end ports) to a destination switch `b` takes carries `a`'s end ports as sources and
/// `b`'s destinations in any such routing, so `mu ≥ max over channels c of min(Σ end ports of
/// the sources forced through c, Σ destinations forced through c)`. Forced channels of a pair
/// are found from both ends: from `a` while a switch has exactly one channel one hop closer
/// to `b`, and back from `b` while a switch has exactly one channel from a switch one hop
/// closer to `a` (a channel in the middle of the paths that all of them share is missed: the
/// bound stays a bound). On a Moore graph (Slim Fly q = 5) or a Dragonfly with one global
/// link per group pair every minimal path is unique and the bound is the mu of port order;
/// cables cut leave most pairs' paths unique. Cost: one BFS per switch and a walk per
/// (source, destination) switch pair, far below one rip-up round.
pub(crate) fn forced_lower_bound(fabric: &Fabric, plan: &VlPlan, ch: &Channels) -> u64 {
    let ns = fabric.num_switches();
    let nc = ch.len();
    let own = end_ports_per_switch(fabric);
    // Destination weight per switch; `None`: no destination there.
    let mut dw: Vec<Option<u64>> = vec![None; ns];
    for d in &plan.dests {
        let x = &mut dw[d.switch as usize];
        *x = Some(x.unwrap_or(0) + d.weight);
    }
    // Hop distances between all switches (links are bidirectional).
    let mut dist = vec![NONE; ns * ns];
    let mut queue: Vec<u32> = Vec::with_capacity(ns);
    for t in 0..ns {
        ch.hops_from(t, &mut dist[t * ns..(t + 1) * ns], &mut queue);
    }
    // `only[t × ns + x]`: the only channel of `x` to a switch one hop closer to `t`, if there
    // is exactly one (else NONE); `back[c]`: the channel of the same cable the other way, for
    // a channel that is the only one between its switches (else NONE).
    let mut only = vec![NONE; ns * ns];
    for t in 0..ns {
        let row = &dist[t * ns..(t + 1) * ns];
        for x in 0..ns {
            let dx = row[x];
            if dx == NONE || dx == 0 {
                continue;
            }
            let mut found = NONE;
            for c in ch.of_switch(x) {
                if row[ch.remote[c as usize] as usize].wrapping_add(1) == dx {
                    if found != NONE {
                        found = NONE;
                        break;
                    }
                    found = c;
                }
            }
            only[t * ns + x] = found;
        }
    }
    let mut back = vec![NONE; nc];
    for y in 0..ns {
        for c in ch.of_switch(y) {
            let z = ch.remote[c as usize] as usize;
            let mut to_y = ch.of_switch(z).filter(|&e| ch.remote[e as usize] as usize == y);
            if let (Some(e), None) = (to_y.next(), to_y.next()) {
                back[c as usize] = e;
            }
        }
    }
    let mut src = vec![0u64; nc];
    let mut src_of = vec![NONE; nc];
    let words = ns.div_ceil(64);
    let mut dst_set = vec![0u64; nc * words];
    let mut dst = vec![0u64; nc];
    let mut forced: Vec<u32> = Vec::new();
    for a in 0..ns {
        if own[a] == 0 {
            continue;
        }
        for b in 0..ns {
            let Some(wb) = dw[b] else { continue };
            let dab = dist[b * ns + a];
            if b == a || dab == NONE {
                continue;
            }
            forced.clear();
            // From `a` towards `b`.
            let mut x = a;
            while x != b {
                let c = only[b * ns + x];
                if c == NONE {
                    break;
                }
                forced.push(c);
                x = ch.remote[c as usize] as usize;
            }
            // Back from `b` towards `x` (where the walk from `a` stopped).
            let mut y = b;
            while y != x {
                let c = only[a * ns + y];
                if c == NONE || back[c as usize] == NONE {
                    break;
                }
                // The channel z → y of the same cable: all paths from `a` enter `y` by it.
                forced.push(back[c as usize]);
                y = ch.remote[c as usize] as usize;
            }
            for &c in &forced {
                let c = c as usize;
                if src_of[c] != a as u32 {
                    src_of[c] = a as u32;
                    src[c] += own[a];
                }
                let (w, bit) = (c * words + b / 64, 1u64 << (b % 64));
                if dst_set[w] & bit == 0 {
                    dst_set[w] |= bit;
                    dst[c] += wb;
                }
            }
        }
    }
    (0..nc).map(|c| src[c].min(dst[c])).max().unwrap_or(0)
}
