//! The Ftree family (thesis §1.4.1 and §5.1): Ftree (Alg. 1, defined close to OpenSM's
//! implementation, with the Δ counter and the fault-tolerant loop over the up ports), Ftree2
//! (Alg. 9, §5.1.2: remote switch usage before local port usage) and Ftree-Random (Alg. 8,
//! §5.1.1: Ftree's traversal with seeded random choices), each on the ranking's link directions
//! or on the BFS directions of Alg. 10 (BFS-Ftree, BFS-Ftree2, BFS-Ftree-Random, §5.1.3).
//!
//! Ftree is a greedy traversal per destination: starting at the destination's leaf it ascends
//! (setting *down* routes on the switches above) and descends from every switch it reaches
//! (setting *up* routes on the switches below); the usage counters carry load balance from one
//! destination to the next, so destinations are routed one after the other, in the order of
//! the thesis and OpenSM: leaf by leaf (topological order, [`crate::prep::topological_nids`]),
//! then by port. Ftree-Random has no shared counters: its destinations are routed in parallel,
//! each with a ChaCha8 generator seeded by `(seed, end port GUID)`, so its tables depend on the
//! seed only, not on the thread count. See [`traverse`] for the traversal and its up*/down*
//! guarantee. Destinations that a switch cannot reach by an up*/down* path get
//! [`NO_ROUTE`](crate::NO_ROUTE) there (`route_all_checked` re-routes them by Up*/Down*).
//! Switch LIDs are routed by [`crate::swlid`] like the other engines.

#[cfg(test)]
mod tests;
mod traverse;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use fabric_topology::{Fabric, Lid, PortNum};

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::{Lfts, NO_ROUTE};
use crate::prep::{self, Oriented, TopoNids, NONE};
use crate::swlid;
use crate::updown::bfs_levels;

use traverse::{Rule, Usage, Walk};

/// Which member of the Ftree family.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FtreeVariant {
    /// Thesis Alg. 1.
    Ftree,
    /// Thesis Alg. 9.
    Ftree2,
    /// Thesis Alg. 8, with the seed of its random choices.
    Random { seed: u64 },
}

/// Where the link directions come from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Directions {
    /// The ranking's levels (fat-trees).
    Ranking,
    /// A BFS spanning tree (Alg. 10), any topology.
    Bfs,
}

/// An engine of the Ftree family (thesis Alg. 1, 8, 9; BFS variants §5.1.3).
#[derive(Copy, Clone, Debug)]
pub struct Ftree {
    /// Ftree, Ftree2 or Ftree-Random.
    pub variant: FtreeVariant,
    /// Ranking or BFS directions.
    pub directions: Directions,
}

impl Ftree {
    /// The engine of `variant` on `directions`.
    pub fn new(variant: FtreeVariant, directions: Directions) -> Self {
        Ftree { variant, directions }
    }
}

impl RoutingEngine for Ftree {
    fn name(&self) -> &'static str {
        match (self.variant, self.directions) {
            (FtreeVariant::Ftree, Directions::Ranking) => "ftree",
            (FtreeVariant::Ftree2, Directions::Ranking) => "ftree2",
            (FtreeVariant::Random { .. }, Directions::Ranking) => "ftree-random",
            (FtreeVariant::Ftree, Directions::Bfs) => "bfs-ftree",
            (FtreeVariant::Ftree2, Directions::Bfs) => "bfs-ftree2",
            (FtreeVariant::Random { .. }, Directions::Bfs) => "bfs-ftree-random",
        }
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let bfs;
        let level: &[Option<u32>] = match self.directions {
            Directions::Ranking => &ctx.ranking.level,
            Directions::Bfs => {
                bfs = bfs_levels(ctx.fabric);
                &bfs
            }
        };
        let o = Oriented::new(ctx.fabric, level);
        let costs = prep::costs(&o);
        let tn = prep::topological_nids(ctx.fabric, &o, &costs);
        let g = Graph::new(ctx.fabric, &o, costs.down);
        route_end_ports(ctx, &o, &g, &tn, self.variant, set, lfts);
        if set == LidSet::Base {
            swlid::fill_switch_lids(ctx.fabric, ctx.lids, &o, lfts);
        }
        Ok(())
    }
}

/// One oriented switch-to-switch cable as seen from one end: remote position and remote port
/// (the entry the remote switch gets when it is routed through this cable).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Link {
    pub remote: u32,
    pub rport: PortNum,
}

/// The oriented fabric as flat port lists: per position its up links and down links (each in
/// port-group order, the parallel ports of a group contiguous), leaf indices and downcosts.
pub(crate) struct Graph {
    pub ups: Vec<Link>,
    pub downs: Vec<Link>,
    up_start: Vec<u32>,
    down_start: Vec<u32>,
    pub leaf_idx: Vec<u32>,
    pub nleaves: usize,
    /// Downcosts c' (position-major, one column per leaf; 255 = no downward path).
    down_cost: Vec<u8>,
}

impl Graph {
    /// `down_cost`: the downcosts of [`prep::costs`] for `o`.
    pub fn new(fabric: &Fabric, o: &Oriented, down_cost: Vec<u8>) -> Self {
        let np = o.len();
        let mut ups = Vec::new();
        let mut downs = Vec::new();
        let mut up_start = Vec::with_capacity(np + 1);
        let mut down_start = Vec::with_capacity(np + 1);
        for p in 0..np {
            let s = o.order[p];
            let groups = fabric.port_groups(s);
            up_start.push(ups.len() as u32);
            down_start.push(downs.len() as u32);
            for (is_up, nbrs) in [(true, o.ups(p)), (false, o.downs(p))] {
                for nb in nbrs {
                    for &port in &groups[nb.group as usize].ports {
                        if let Some((_, rport)) = fabric.switch_link_live(s, port) {
                            let l = Link { remote: nb.pos, rport };
                            if is_up {
                                ups.push(l);
                            } else {
                                downs.push(l);
                            }
                        }
                    }
                }
            }
        }
        up_start.push(ups.len() as u32);
        down_start.push(downs.len() as u32);
        Graph {
            ups,
            downs,
            up_start,
            down_start,
            leaf_idx: o.leaf_idx.clone(),
            nleaves: o.num_leaves(),
            down_cost,
        }
    }
    pub fn len(&self) -> usize {
        self.leaf_idx.len()
    }
    pub fn up_range(&self, p: usize) -> std::ops::Range<usize> {
        self.up_start[p] as usize..self.up_start[p + 1] as usize
    }
    pub fn down_range(&self, p: usize) -> std::ops::Range<usize> {
        self.down_start[p] as usize..self.down_start[p + 1] as usize
    }
    #[inline]
    pub fn down_cost(&self, p: usize, leaf: usize) -> u8 {
        self.down_cost[p * self.nleaves + leaf]
    }
}

/// One destination: its LID, leaf position, leaf port and end port GUID.
struct Dest {
    lid: Lid,
    leaf: u32,
    port: PortNum,
    guid: u64,
}

/// Routes every end-port LID of `set`: one column per destination (computed in destination
/// order for Ftree/Ftree2, in parallel for Ftree-Random), then written into the rows in
/// parallel.
fn route_end_ports(
    ctx: &RoutingContext<'_>,
    o: &Oriented,
    g: &Graph,
    tn: &TopoNids,
    variant: FtreeVariant,
    set: LidSet,
    lfts: &mut Lfts,
) {
    let fabric = ctx.fabric;
    let off = set.offset(ctx.lids);
    let mut leaves: Vec<u32> = (0..o.num_leaves() as u32).collect();
    leaves.sort_by_key(|&li| tn.leaf_start[li as usize]);
    let mut dests = Vec::new();
    for li in leaves {
        let lp = o.leaves[li as usize];
        let sw = o.order[lp as usize];
        for &ep in fabric.attached_end_ports(sw) {
            let base = ctx.lids.base_lid(ep);
            if base == 0 {
                continue;
            }
            let port = fabric.end_port(ep).attach.map_or(NO_ROUTE, |(_, pn)| pn);
            dests.push(Dest {
                lid: base + off,
                leaf: lp,
                port,
                guid: fabric.end_port(ep).port_guid,
            });
        }
    }
    // End ports no oriented leaf holds (not live, or on a switch without a level).
    let unrouted: Vec<Lid> = fabric
        .end_port_ids()
        .filter(|&ep| {
            let on_oriented_leaf = matches!(fabric.end_port(ep).attach, Some((sw, _)) if o.pos[sw.idx()] != NONE);
            ctx.lids.base_lid(ep) != 0 && !(fabric.end_port_live(ep) && on_oriented_leaf)
        })
        .map(|ep| ctx.lids.base_lid(ep) + off)
        .collect();
    let np = o.len();
    let mut cols = vec![NO_ROUTE; dests.len() * np];
    if np > 0 {
        match variant {
            FtreeVariant::Ftree | FtreeVariant::Ftree2 => {
                let rule = if variant == FtreeVariant::Ftree {
                    Rule::Ftree
                } else {
                    Rule::Ftree2
                };
                let mut usage = Usage::new(g);
                let mut walk = Walk::new(g, rule);
                for (d, col) in dests.iter().zip(cols.chunks_mut(np)) {
                    walk.route(d.leaf, d.port, &mut usage, col);
                }
            }
            FtreeVariant::Random { seed } => {
                dests.par_iter().zip(cols.par_chunks_mut(np)).for_each_init(
                    || (Walk::new(g, Rule::Random), Usage::new(&Graph::empty())),
                    |(walk, usage), (d, col)| {
                        walk.rng = Some(ChaCha8Rng::seed_from_u64(mix(seed, d.guid)));
                        walk.route(d.leaf, d.port, usage, col);
                    },
                );
            }
        }
    }
    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
        for &lid in &unrouted {
            row[lid as usize] = NO_ROUTE;
        }
        let p = o.pos[s];
        for (i, d) in dests.iter().enumerate() {
            row[d.lid as usize] = if p == NONE { NO_ROUTE } else { cols[i * np + p as usize] };
        }
    });
}

/// Seed of one destination's generator: `seed` and the end port GUID (SplitMix64 finaliser).
fn mix(seed: u64, guid: u64) -> u64 {
    let mut z = seed ^ guid.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Graph {
    /// A graph without switches (the unused counters of Ftree-Random).
    fn empty() -> Self {
        Graph {
            ups: Vec::new(),
            downs: Vec::new(),
            up_start: vec![0],
            down_start: vec![0],
            leaf_idx: Vec::new(),
            nleaves: 0,
            down_cost: Vec::new(),
        }
    }
}
