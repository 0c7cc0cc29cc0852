//! `mu-sssp`: destination-based routing of any topology that minimises the all-to-all
//! congestion `mu` of [`fabric_metrics`'s definition](../../../docs/routing.md) (per directed
//! switch-to-switch channel, min(distinct source end ports, distinct destination end ports)
//! crossing it) rather than raw path counts; issue #19. Own design.
//!
//! Why: a channel that only carries the end ports of the switch it leaves ("source-pure", a
//! first hop) or only traffic to the end ports of the switch it enters ("destination-pure", a
//! last hop) has `mu` ≤ the end ports of one switch, however many paths cross it. Dimension-order
//! routing on a HyperX is such a routing (first hops along X, last hops along Y); DFSSSP's
//! balancing of path counts mixes first and last hops on every channel. This engine looks for
//! pure channels on any graph, without knowing dimensions.
//!
//! 1. **Counters.** Per channel `c`: `src_cnt[s][c]` (destinations whose route from switch `s`
//!    crosses `c`), the end ports of the distinct source switches `S(c)`, the distinct
//!    destination end ports `T(c)` and the load (pairs). Sources are switches: with
//!    destination-based tables all end ports of a switch share the route to a destination.
//!    Destinations are end ports ([`crate::balanced::VlPlan`] with one VL: end-port base
//!    LIDs, a switch's LID following its first end port, switches without end ports last).
//! 2. **First pass: port order** (`kernel::port_order`): every switch takes its
//!    lowest-numbered port to a switch one hop closer (OpenSM lash's choice, dimension order on
//!    a HyperX cabled dimension by dimension); its counters are loaded.
//! 3. **Rip-up and reroute.** Up to [`MU_ROUNDS`] rounds remove each destination (end port `i`
//!    of every switch before end port `i + 1` of any; from round 2 on only the destinations
//!    whose tree takes a channel at the routing's mu) and route it again against all the
//!    others: its tree is grown from its switch outwards in BFS order (cached per switch), and
//!    switch `u` takes, among its channels to switches one hop closer (minimal paths only),
//!    the one whose path (the channel and the tree beyond it, already fixed) has the least
//!    (highest min(S, T) on the path once `u`'s end ports and the destination are added,
//!    raised to the routing's `mu` so far; total increase of min(S, T); highest load; channel
//!    index). The rounds stop after one that lowers neither mu nor the channels at mu, and
//!    from round 2 on after one that does not lower mu; the routing of least (mu, channels
//!    at mu, Σ min(S, T), max load) is kept.
//! 4. **Candidates.** Port order and the rounds' routing; the rounds are skipped on regular
//!    fabrics (every switch with the same channels and end ports: [`regular`]) and when port
//!    order reaches a lower bound of mu of every minimal routing (the larger of
//!    [`mu_lower_bound`]'s and the forced channels' of `kernel::forced_lower_bound`; since 28
//!    Nov 2026, H27: the cut Slim Flies' 1 % files), and stop after a round that reaches
//!    it; their routing is kept only when it
//!    lowers mu without needing more layers (ties: port order; port order's layering within
//!    fewer layers is then checked by the first fit alone).
//!
//! Deadlock freedom is not built into the routing: the daemon and `fabricctl` layer the
//! installed tables with [`layering`] (the fewer layers of a LASH-like first fit and DFSSSP's
//! cycle breaking; [`crate::vl_layering`]); docs/routing.md has the numbers. The layering of
//! the kept tables is remembered (`cache`) for that call.
//!
//! Until 28 Nov 2026 a third candidate (the trees above from scratch instead of port order) and
//! a one-VL CDG order as tie-break were computed too: they cost 80–90 % of the time and won
//! only ties on the 12 files (docs/routing.md).
//!
//! Deterministic (no randomness; the first fit's hash map only deduplicates). Sequential but
//! for one step: where the rounds' routing competes, its layering and port order's first-fit
//! check run side by side (`rayon::join`; the same result on one thread).
//! Memory: `channels × switches` counters (`u16`) and `switches²` BFS entries; fabrics above
//! [`MU_MAX_COUNTERS`] counters or [`MU_MAX_DESTINATIONS`] destinations are refused (use
//! `dfsssp`).

mod cache;
mod kernel;
mod layering;
#[cfg(test)]
mod tests;

pub use kernel::{MU_MAX_COUNTERS, MU_MAX_DESTINATIONS, MU_ROUNDS};
pub use layering::{first_fit, layering};

use crate::balanced::{write_next_hops, VlPlan};
use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;
use crate::sssp::Channels;
use crate::vl::IB_MAX_DATA_VLS;

/// The mu-sssp engine (see the module documentation).
#[derive(Copy, Clone, Debug, Default)]
pub struct MuSssp;

/// Statistics of one mu-sssp routing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MuStats {
    /// Destinations routed (end ports, and switches without end ports).
    pub destinations: usize,
    /// All-to-all `mu` of the routing the engine kept (its own count, before any validity
    /// repair).
    pub mu: u64,
    /// Round whose routing was kept (0: the first pass).
    pub round: usize,
    /// Candidate kept ([`CANDIDATES`]).
    pub candidate: &'static str,
    /// Layers of the kept routing's layering ([`layering`]).
    pub layers: u8,
    /// mu of port order (round 0).
    pub port_order_mu: u64,
    /// Rip-up rounds run (0: skipped) and the mu of their best routing.
    pub rounds_run: usize,
    pub rounds_mu: u64,
    /// Destinations the rounds re-routed, counted once per round (round 1 re-routes all of
    /// them, the later rounds only those on the channels at mu).
    pub rerouted: usize,
    /// The lower bound of mu port order was compared with (the rounds run only below it and
    /// stop once they reach it): the larger of [`mu_lower_bound`]'s and, when port order is
    /// above that, of the forced channels' (`kernel::forced_lower_bound`); 0 on a regular
    /// fabric (no rounds).
    pub lower_bound: u64,
}

/// The candidate routings, in order of preference on ties: minimal routing by port order
/// alone, and port order improved by the rip-up rounds.
pub const CANDIDATES: [&str; 2] = ["port-order", "port-order+rounds"];

impl MuSssp {
    /// Routes the base LIDs and returns the routing's statistics.
    pub fn route_stats(&self, ctx: &RoutingContext<'_>, lfts: &mut Lfts) -> Result<MuStats, RoutingError> {
        self.route_counted(ctx, lfts, true)
            .map(|st| st.expect("statistics were asked for"))
    }

    /// Routes the base LIDs; the statistics only when `count` (or when the rip-up rounds
    /// run): without them port order's counters are not loaded on a fabric where the rounds
    /// are skipped (a regular one), as the daemon's [`RoutingEngine::route`] (same tables and
    /// layering; measured: ~28 % of the complete SLIMFLY(5;4)'s instructions).
    fn route_counted(
        &self,
        ctx: &RoutingContext<'_>,
        lfts: &mut Lfts,
        count: bool,
    ) -> Result<Option<MuStats>, RoutingError> {
        check_route_args(ctx, LidSet::Base, lfts)?;
        let f = ctx.fabric;
        let ns = f.num_switches();
        let ch = Channels::new(f);
        let nc = ch.len();
        if nc.saturating_mul(ns) > MU_MAX_COUNTERS {
            return Err(RoutingError::Unsupported {
                engine: "mu-sssp",
                reason: format!(
                    "{nc} channels × {ns} switches exceed its {MU_MAX_COUNTERS} source counters (use dfsssp)"
                ),
            });
        }
        let plan = VlPlan::new(f, ctx.lids, 1);
        if plan.len() > MU_MAX_DESTINATIONS {
            return Err(RoutingError::Unsupported {
                engine: "mu-sssp",
                reason: format!(
                    "{} destinations exceed its {MU_MAX_DESTINATIONS} (use dfsssp)",
                    plan.len()
                ),
            });
        }
        let po = kernel::port_order(f, &plan, &ch);
        let lb = mu_lower_bound(f, &ch);
        // Tables and their layering if it needs at most `max` layers (`u8::MAX`: more); with
        // `by_ff` a first fit needing more than `max` says no alone.
        let tables_with = |next: &[u32], ch: &Channels, max: u8, by_ff: bool| {
            let mut t = lfts.clone();
            write_next_hops(f, ctx.lids, &plan, next, ch, &mut t);
            let l = if by_ff {
                layering::within_by_first_fit(f, ctx.lids, &t, max)
            } else {
                layering::fewest_within(f, ctx.lids, &t, max)
            };
            let layers = l.as_ref().map_or(u8::MAX, |l| l.num_layers);
            (t, l, layers)
        };
        let tables = |next: &[u32], ch: &Channels, max: u8| tables_with(next, ch, max, false);
        let stats = |mu: u64, round: usize, layers: u8, mu0: u64, r: &kernel::Routed| MuStats {
            destinations: plan.len(),
            mu,
            round,
            candidate: CANDIDATES[usize::from(round > 0)],
            layers,
            port_order_mu: mu0,
            rounds_run: r.rounds_run,
            rounds_mu: r.mu,
            rerouted: r.rerouted,
            lower_bound: 0,
        };
        // Port order is round 0 of the rounds: when it reaches a lower bound of mu nothing
        // can beat it and the rounds are skipped.
        // On a regular fabric port order is kept without rounds (see [`regular`]).
        let rounds = if regular(f, &ch) { 0 } else { MU_ROUNDS };
        if rounds == 0 && !count {
            // What the branch without rounds below installs, without port order's counters.
            let (t, l, _) = tables(&po, &ch, IB_MAX_DATA_VLS);
            if let Some(l) = l {
                cache::store(f, ctx.lids, &t, l);
            }
            *lfts = t;
            return Ok(None);
        }
        let (mut mu0, mut first) = (0, None);
        let mut lb_forced = 0;
        let r = kernel::route(f, &plan, Channels::new(f), &po, rounds, |mu| {
            mu0 = mu;
            // The rounds route on minimal paths too: when port order reaches a lower bound of
            // their mu they cannot lower it and their routing would not compete (until 28 Nov
            // 2026 they ran when port order needed two layers or more: never kept).
            if mu > lb {
                lb_forced = kernel::forced_lower_bound(f, &plan, &ch);
                if mu > lb_forced {
                    return Some(lb.max(lb_forced));
                }
            }
            let x = tables(&po, &ch, IB_MAX_DATA_VLS);
            first = Some(x);
            None
        });
        // The rounds' routing competes only when it lowers mu (ties: port order); then port
        // order wins only with fewer layers, so its layering may stop at one less.
        let (t, l, st) = if r.round > 0 && r.mu < mu0 {
            // The rounds' layering and port order's check within one layer fewer run side by
            // side (two routing threads): port order's first fit starts before that bound is
            // known and waits for it only when it needs a second layer (same result as
            // after it: `within_by_first_fit_later`).
            let ((tr, lr, layers_r), po_checked) = match first {
                Some(x) => (tables(&r.next, &r.ch, IB_MAX_DATA_VLS), Some(x)),
                None => {
                    let bound = (std::sync::Mutex::new(None::<u8>), std::sync::Condvar::new());
                    rayon::join(
                        || {
                            // Publishes the bound, also when the layering panics (the other
                            // side then stops instead of waiting).
                            let mut done = Publish(&bound, 1);
                            let x = tables(&r.next, &r.ch, IB_MAX_DATA_VLS);
                            done.1 = x.2;
                            x
                        },
                        || {
                            let mut t = lfts.clone();
                            write_next_hops(f, ctx.lids, &plan, &po, &ch, &mut t);
                            let l = layering::within_by_first_fit_later(f, ctx.lids, &t, || {
                                let Ok(mut g) = bound.0.lock() else { return 0 };
                                loop {
                                    if let Some(layers_r) = *g {
                                        return layers_r.saturating_sub(1);
                                    }
                                    match bound.1.wait(g) {
                                        Ok(next) => g = next,
                                        Err(_) => return 0,
                                    }
                                }
                            });
                            let layers = l.as_ref().map_or(u8::MAX, |l| l.num_layers);
                            Some((t, l, layers))
                        },
                    )
                }
            };
            let (t0, l0, layers0) =
                po_checked.unwrap_or_else(|| tables_with(&po, &ch, layers_r.saturating_sub(1), true));
            if layers0 < layers_r {
                (t0, l0, stats(mu0, 0, layers0, mu0, &r))
            } else {
                (tr, lr, stats(r.mu, r.round, layers_r, mu0, &r))
            }
        } else {
            let (t0, l0, layers0) = first.unwrap_or_else(|| tables(&po, &ch, IB_MAX_DATA_VLS));
            (t0, l0, stats(mu0, 0, layers0, mu0, &r))
        };
        if let Some(l) = l {
            cache::store(f, ctx.lids, &t, l);
        }
        *lfts = t;
        let lower_bound = if rounds > 0 { lb.max(lb_forced) } else { 0 };
        Ok(Some(MuStats { lower_bound, ..st }))
    }
}

/// Sets the layer count the port-order check waits for when dropped (see `route_counted`).
struct Publish<'a>(&'a (std::sync::Mutex<Option<u8>>, std::sync::Condvar), u8);

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        if let Ok(mut g) = self.0 .0.lock() {
            *g = Some(self.1);
        }
        self.0 .1.notify_all();
    }
}

/// Whether every switch is up with the same number of live channels and the same number of
/// end ports (a complete Slim Fly, Dragonfly or HyperX): the rip-up rounds are skipped there
/// and port order is kept. Measured on the four complete fabrics (28 Nov 2026): the
/// rounds ran 0–3 times and never lowered mu (SF(5;4) 28, HYPERX(8,8;4) 4, SF(7) 54,
/// DRAGONFLY(3) 57), at a third to a half of the engine's time. Not measured on other regular
/// graphs (random regular ones keep port order too).
fn regular(f: &fabric_topology::Fabric, ch: &Channels) -> bool {
    let mut shape = None;
    f.switch_ids().all(|s| {
        let x = (
            f.switch(s).up,
            ch.of_switch(s.idx()).len(),
            f.attached_end_ports(s).len(),
        );
        x.0 && *shape.get_or_insert(x) == x
    })
}

/// A lower bound of the all-to-all `mu` of any routing: a switch with `p` end ports sends to
/// the `n − p` other end ports over its `k` channels, so one of them carries its `p` sources
/// to at least `⌈(n − p) / k⌉` destinations.
fn mu_lower_bound(f: &fabric_topology::Fabric, ch: &Channels) -> u64 {
    let p = kernel::end_ports_per_switch(f);
    let n: u64 = p.iter().sum();
    (0..p.len())
        .filter(|&s| p[s] > 0 && !ch.of_switch(s).is_empty())
        .map(|s| p[s].min((n - p[s]).div_ceil(ch.of_switch(s).len() as u64)))
        .max()
        .unwrap_or(0)
}

impl RoutingEngine for MuSssp {
    fn name(&self) -> &'static str {
        "mu-sssp"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        if set == LidSet::Escape {
            return Err(RoutingError::Unsupported {
                engine: "mu-sssp",
                reason: "it routes the base LIDs; the escape LIDs are Up*/Down*'s".to_string(),
            });
        }
        self.route_counted(ctx, lfts, false).map(|_| ())
    }
}
