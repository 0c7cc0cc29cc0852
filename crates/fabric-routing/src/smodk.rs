//! Smodk (thesis §1.4.3): the source-based counterpart of Dmodk. A switch picks its output
//! port from the *input port* of the message — going up, `p_up = i' mod (w_{l+1} p_{l+1})` with
//! `i'` the index of the input port among the switch's ordered down ports; going down, among
//! the authorised down ports (those towards the destination), `p_down = i' mod p_l`.
//!
//! **Not programmable into LFTs.** An InfiniBand linear forwarding table maps a destination
//! LID to an output port, whatever the input port or the source; Smodk needs the input port,
//! so [`Smodk`] refuses to fill LFTs with [`RoutingError::Unsupported`]. (A switch with
//! per-input-port tables — as BXI's, for which the thesis defines it — could hold it.)
//!
//! What is provided instead is the routing function itself for analysis: [`SmodkPaths`] gives
//! Smodk's path from any source to any destination (the hops a packet would take), so that
//! congestion metrics can be computed on the paths. On k-ary n-trees (`m_l = w_{l+1}`,
//! `p = 1`), Smodk's path `s → d` is exactly Dmodk's path `d → s` reversed, which is the
//! symmetry of thesis §3.4: `μ(P(Dmodk)) = μ(Q(Smodk))` for `Q` the transposed pattern (tested
//! below on the thesis' 2-ary 3-tree of Fig. 1.9). Consequences for fabric metrics: `mu_sp`,
//! the distribution of `mu_rp` (the transpose of a uniform random permutation is uniform) and
//! `mu_a2a` of Smodk equal Dmodk's there.
//!
//! For the down direction the printed `i'` is ambiguous (the input port is then an up port):
//! here it is the index of the input port among the switch's ordered up ports.

use fabric_topology::{EndPortId, Fabric, PortNum, Remote, SwitchId};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;
use crate::prep::{self, Costs, Oriented, INF, NONE};

/// The Smodk engine: refuses LFT routing ([`RoutingError::Unsupported`], see the module
/// documentation); its paths are given by [`SmodkPaths`].
#[derive(Copy, Clone, Debug, Default)]
pub struct Smodk;

/// Why Smodk cannot fill LFTs.
pub const SMODK_UNSUPPORTED: &str = "Smodk chooses each output port from the packet's input port (its source), \
     but InfiniBand linear forwarding tables forward by destination LID only, so it cannot be \
     programmed into LFTs; by the symmetry of thesis §3.4 (exact on k-ary n-trees) its \
     congestion on a pattern is Dmodk's on the transposed pattern, so analyse dmodk instead";

impl RoutingEngine for Smodk {
    fn name(&self) -> &'static str {
        "smodk"
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: SMODK_UNSUPPORTED.into(),
        })
    }
}

/// Errors of [`SmodkPaths::path`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SmodkPathError {
    /// An end port is not live or not attached to a switch with a level.
    #[error("end port {0:?} is not live on a ranked leaf")]
    NotRouted(EndPortId),
    /// The input-port rule led to a switch without an up port and without a downward path to
    /// the destination (a degraded fabric: Smodk is defined for complete fat-trees).
    #[error("Smodk reached switch {switch:?}, which has neither an up port nor a downward path to {dst:?}")]
    Stuck { switch: SwitchId, dst: EndPortId },
}

/// Smodk's routing function on a ranked fat-tree (thesis §1.4.3): paths per (source,
/// destination) pair from input ports.
pub struct SmodkPaths<'f> {
    fabric: &'f Fabric,
    o: Oriented,
    costs: Costs,
    /// Per position: ordered up ports and ordered down ports towards switches or end ports.
    ups: Vec<Vec<PortNum>>,
    downs: Vec<Vec<PortNum>>,
}

impl<'f> SmodkPaths<'f> {
    /// Prepares the routing function for the link directions `level` (the ranking's).
    pub fn new(fabric: &'f Fabric, level: &[Option<u32>]) -> Self {
        let o = Oriented::new(fabric, level);
        let costs = prep::costs(&o);
        let mut ups = Vec::with_capacity(o.len());
        let mut downs = Vec::with_capacity(o.len());
        for p in 0..o.len() {
            let s = o.order[p];
            let groups = fabric.port_groups(s);
            let mut u: Vec<PortNum> = o
                .ups(p)
                .iter()
                .flat_map(|n| groups[n.group as usize].ports.iter().copied())
                .collect();
            let mut d: Vec<PortNum> = o
                .downs(p)
                .iter()
                .flat_map(|n| groups[n.group as usize].ports.iter().copied())
                .collect();
            d.extend(
                fabric
                    .attached_end_ports(s)
                    .iter()
                    .filter_map(|&e| fabric.end_port(e).attach.map(|a| a.1)),
            );
            u.sort_unstable();
            d.sort_unstable();
            ups.push(u);
            downs.push(d);
        }
        SmodkPaths {
            fabric,
            o,
            costs,
            ups,
            downs,
        }
    }

    /// Smodk's path from `src` to `dst` as `(switch, output port)` hops, the last one being the
    /// destination leaf's port to `dst` (the format of [`crate::check::trace`]). Empty when
    /// `src == dst`.
    pub fn path(
        &self,
        src: EndPortId,
        dst: EndPortId,
        hops: &mut Vec<(SwitchId, PortNum)>,
    ) -> Result<(), SmodkPathError> {
        hops.clear();
        if src == dst {
            return Ok(());
        }
        let f = self.fabric;
        let at = |e: EndPortId| -> Result<(usize, PortNum), SmodkPathError> {
            match f.end_port(e).attach {
                Some((sw, port)) if f.end_port_live(e) && self.o.pos[sw.idx()] != NONE => {
                    Ok((self.o.pos[sw.idx()] as usize, port))
                }
                _ => Err(SmodkPathError::NotRouted(e)),
            }
        };
        let (mut p, mut input) = at(src)?;
        let (dp, dport) = at(dst)?;
        let dleaf = self.o.leaf_idx[dp] as usize;
        let mut from_below = true;
        for _ in 0..=self.o.len() {
            let sw = self.o.order[p];
            if p == dp {
                hops.push((sw, dport));
                return Ok(());
            }
            let class = if from_below { &self.downs[p] } else { &self.ups[p] };
            let i = class.iter().position(|&x| x == input).unwrap_or(0);
            let port = if self.costs.down_row(p)[dleaf] != INF {
                // Down: the authorised ports lead to a switch with a smaller downcost.
                let own = self.costs.down_row(p)[dleaf];
                let auth: Vec<PortNum> = self.downs[p]
                    .iter()
                    .copied()
                    .filter(|&x| match f.switch_link_live(sw, x) {
                        Some((r, _)) => {
                            let rp = self.o.pos[r.idx()];
                            rp != NONE && self.costs.down_row(rp as usize)[dleaf] < own
                        }
                        None => false,
                    })
                    .collect();
                if auth.is_empty() {
                    return Err(SmodkPathError::Stuck { switch: sw, dst });
                }
                from_below = false;
                auth[i % auth.len()]
            } else {
                let u = &self.ups[p];
                if u.is_empty() {
                    return Err(SmodkPathError::Stuck { switch: sw, dst });
                }
                from_below = true;
                u[i % u.len()]
            };
            hops.push((sw, port));
            match f.switch(sw).ports[port as usize].remote {
                Remote::Switch { .. } => {
                    let (next, rport) = f
                        .switch_link_live(sw, port)
                        .ok_or(SmodkPathError::Stuck { switch: sw, dst })?;
                    p = self.o.pos[next.idx()] as usize;
                    input = rport;
                }
                _ => return Err(SmodkPathError::Stuck { switch: sw, dst }),
            }
        }
        Err(SmodkPathError::Stuck {
            switch: self.o.order[p],
            dst,
        })
    }
}

#[cfg(test)]
mod tests;
