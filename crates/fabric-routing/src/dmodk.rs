//! Dmodk (thesis §1.4.2): the closed form on complete PGFTs, from switch and port addressing
//! only (no costs). For a level-`L` switch (0 = leaf) and end node `d` (generator index, digits
//! `a_1..a_h`):
//!
//! * `d` below the switch (its m-digits equal `a_{L+2}..a_h`): the child `a_{L+1}` (a leaf's
//!   port `a_1 + 1`), parallel cable `⌊d / W_L⌋ mod p_{L+1}`;
//! * otherwise up: `q = ⌊d / W_L⌋ mod (w_{L+2} · p_{L+2})`, parent `q mod w_{L+2}`, parallel
//!   cable `⌊q / w_{L+2}⌋`,
//!
//! with `W_L = w_1 ⋯ w_{L+1}` (notation indices, 1-based) — the product of up-arities below,
//! which is what Dmodc's divider Π reproduces.
//!
//! The fabric is recognised from its structure ([`PgftLayout::recognize_structure`] on the
//! ranking's levels), not from the names fabricctl's generator writes: a complete PGFT read
//! from an `ibnetdiscover` dump, with any names, GUIDs and port numbers, is routed too. Ports
//! are taken from the cabling: child `c` (parent `j`) is the port group whose remote has that
//! digit, parallel cable `k` its `k`-th port in port order, and a leaf's end node its own port.
//! The recognition numbers parents in GUID order and end nodes in Dmodc's topological order
//! (Alg. 7), so Dmodk and Dmodc give the same bytes on every complete PGFT.
//!
//! Switch LIDs are routed like Dmodc's (any up-down path for the PGFT levels).
//!
//! Grouped Dmodk (thesis §3.4, Alg. 4) applies the same closed form to the end-node indices
//! re-indexed by group ([`NodeGroups`]).

use rayon::prelude::*;

use fabric_topology::gen::PgftLayout;
use fabric_topology::{Lid, PortNum, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::groups::NodeGroups;
use crate::lft::{Lfts, NO_ROUTE};
use crate::prep::Oriented;
use crate::swlid;

/// The Dmodk engine; fails with [`RoutingError::NotCompletePgft`] (and the reason) unless the
/// fabric is a complete, live PGFT/XGFT/k-ary n-tree/RLFT, recognised from its structure by
/// [`PgftLayout::recognize_structure`].
#[derive(Copy, Clone, Debug, Default)]
pub struct Dmodk;

impl RoutingEngine for Dmodk {
    fn name(&self) -> &'static str {
        "dmodk"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        self.route_with(ctx, set, lfts, None)
    }
}

/// Gdmodk: the Dmodk closed form on the generator's end-node indices re-indexed by group
/// (Alg. 4); complete PGFTs only, like Dmodk.
#[derive(Copy, Clone, Debug)]
pub struct GroupedDmodk<'g>(pub &'g NodeGroups);

impl RoutingEngine for GroupedDmodk<'_> {
    fn name(&self) -> &'static str {
        "gdmodk"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        self.0.check(ctx)?;
        Dmodk.route_with(ctx, set, lfts, Some(self.0))
    }
}

impl Dmodk {
    /// Whether Dmodk can route `fabric` (a complete PGFT with every link up, recognised on the
    /// levels of a default ranking): the reason when it cannot, e.g. a degraded fabric (for a
    /// configuration check or a start).
    pub fn check_fabric(fabric: &fabric_topology::Fabric) -> Result<(), RoutingError> {
        let ranking = fabric_ranking::rank(fabric, &fabric_ranking::RankOptions::default());
        Self::layout(fabric, &ranking.level).map(|_| ())
    }

    fn layout(f: &fabric_topology::Fabric, level: &[Option<u32>]) -> Result<PgftLayout, RoutingError> {
        PgftLayout::recognize_structure(f, level).map_err(|e| RoutingError::NotCompletePgft(e.to_string()))
    }

    /// Dmodk, or Gdmodk when `groups` is given (end-node indices re-indexed by Alg. 4).
    pub(crate) fn route_with(
        &self,
        ctx: &RoutingContext<'_>,
        set: LidSet,
        lfts: &mut Lfts,
        groups: Option<&NodeGroups>,
    ) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let f = ctx.fabric;
        let layout = Self::layout(f, &ctx.ranking.level)?;
        let spec = &layout.spec;
        let h = spec.h;
        // Per end port: LID of the set, generator index and digits (flat, h per end port).
        let off = set.offset(ctx.lids);
        let mut dest: Vec<(Lid, u64)> = Vec::with_capacity(f.num_end_ports());
        let mut digits: Vec<u32> = Vec::with_capacity(f.num_end_ports() * h);
        // The digits locate the destination (which child to go down to); the index in the
        // modulo (`d` below) is its gNID under Gdmodk.
        let index: Vec<u32> = f.end_port_ids().map(|ep| layout.end_node_index(ep)).collect();
        let gnid = groups.map(|g| g.reindex(&index));
        for ep in f.end_port_ids() {
            let base = ctx.lids.base_lid(ep);
            let n = u64::from(index[ep.idx()]);
            let d = gnid.as_ref().map_or(n, |g| u64::from(g[ep.idx()]));
            dest.push((if base == 0 { 0 } else { base + off }, d));
            digits.extend(spec.node_digits(n));
        }
        // Π_L = w[0] ⋯ w[L].
        let div: Vec<u64> = (0..h)
            .map(|l| spec.w[..=l].iter().map(|&x| u64::from(x)).product::<u64>().max(1))
            .collect();
        // The leaf port of every end port.
        let attach: Vec<PortNum> = f
            .end_port_ids()
            .map(|ep| f.end_port(ep).attach.map_or(NO_ROUTE, |(_, pn)| pn))
            .collect();
        lfts.par_rows_mut().enumerate().for_each_init(
            || (Vec::new(), Vec::new()),
            |(down, up): &mut (Vec<usize>, Vec<usize>), (s, row)| {
                let addr = &layout.switch_addr[s];
                let l = addr.level as usize;
                let groups = f.port_groups(SwitchId(s as u32));
                // Port group of every child digit (index l of the child's address) and of every
                // parent digit (index l + 1 of the parent's).
                down.clear();
                up.clear();
                for (gi, g) in groups.iter().enumerate() {
                    let r = &layout.switch_addr[g.remote.idx()];
                    let (v, at) = if r.level as usize + 1 == l {
                        (&mut *down, l)
                    } else {
                        (&mut *up, l + 1)
                    };
                    let dg = r.digits[at] as usize;
                    if v.len() <= dg {
                        v.resize(dg + 1, usize::MAX);
                    }
                    v[dg] = gi;
                }
                for (i, &(lid, d)) in dest.iter().enumerate() {
                    if lid == 0 {
                        continue;
                    }
                    let a = &digits[i * h..(i + 1) * h];
                    let below = (l + 1..h).all(|j| addr.digits[j] == a[j]);
                    let q = d / div[l];
                    let port = if below {
                        if l == 0 {
                            attach[i]
                        } else {
                            let ports = &groups[down[a[l] as usize]].ports;
                            ports[(q % ports.len() as u64) as usize]
                        }
                    } else if l + 1 < h {
                        let wu = u64::from(spec.w[l + 1]);
                        let q = q % (wu * u64::from(spec.p[l + 1]));
                        groups[up[(q % wu) as usize]].ports[(q / wu) as usize]
                    } else {
                        NO_ROUTE
                    };
                    row[lid as usize] = port;
                }
            },
        );
        if set == LidSet::Base {
            let level: Vec<Option<u32>> = layout.switch_addr.iter().map(|a| Some(a.level)).collect();
            swlid::fill_switch_lids(f, ctx.lids, &Oriented::new(f, &level), lfts);
        }
        Ok(())
    }
}
