//! The live fabric as the checks walk it ([`crate::check`], [`crate::deadlock`]): the next hop
//! of every (switch, port) and the connected components of the live switches.

use fabric_topology::{Fabric, Remote};

/// Precomputed next hop of every (switch, port): a switch id, `END | end port id`, or `DEAD`.
/// Rows are `stride` wide (the largest port number + 1), so the table of a large fabric stays
/// in cache; ports beyond a row are `DEAD`.
pub(crate) struct Hops {
    next: Vec<u32>,
    stride: usize,
}
/// Marks an end port in a [`Hops`] entry (`END | end port id`).
pub(crate) const END: u32 = 1 << 31;
/// A [`Hops`] entry that leads nowhere usable.
pub(crate) const DEAD: u32 = u32::MAX;

impl Hops {
    /// The next hops of every live port of `fabric`.
    pub(crate) fn new(fabric: &Fabric) -> Self {
        let stride = fabric
            .switch_ids()
            .map(|s| fabric.switch(s).nports as usize + 1)
            .max()
            .unwrap_or(1);
        let mut next = vec![DEAD; fabric.num_switches() * stride];
        for s in fabric.switch_ids() {
            for (pn, p) in fabric.switch(s).external_ports() {
                let v = match p.remote {
                    Remote::EndPort(ep) if fabric.end_port_live(ep) => END | ep.0,
                    Remote::Switch { .. } => fabric.switch_link_live(s, pn).map_or(DEAD, |(t, _)| t.0),
                    _ => DEAD,
                };
                next[s.idx() * stride + pn as usize] = v;
            }
        }
        Hops { next, stride }
    }
    /// Next hop of switch `s` through `port` (`DEAD` beyond the row).
    #[inline]
    pub(crate) fn get(&self, s: usize, port: u8) -> u32 {
        let port = port as usize;
        if port >= self.stride {
            return DEAD;
        }
        self.next[s * self.stride + port]
    }
}

/// Connected components of live switches (union of live links); `u32::MAX` for dead switches.
pub(crate) fn components(fabric: &Fabric) -> Vec<u32> {
    let mut comp = vec![u32::MAX; fabric.num_switches()];
    let mut next = 0;
    let mut stack = Vec::new();
    for s in fabric.switch_ids() {
        if !fabric.switch(s).up || comp[s.idx()] != u32::MAX {
            continue;
        }
        comp[s.idx()] = next;
        stack.push(s);
        while let Some(x) = stack.pop() {
            for g in fabric.port_groups(x) {
                if comp[g.remote.idx()] == u32::MAX {
                    comp[g.remote.idx()] = next;
                    stack.push(g.remote);
                }
            }
        }
        next += 1;
    }
    comp
}
