//! Deadlock freedom over virtual lanes: routes assigned to virtual layers so that each layer's
//! channel-dependency graph is acyclic (DFSSSP's layering: Domke, Hoefler, Nagel,
//! "Deadlock-free oblivious routing for arbitrary topologies", IPDPS 2011, §IV; the Slim Fly
//! paper, seed 003 §5.2, uses the same scheme for its layered multipath routing).
//!
//! **Routes.** Routing is destination-based: the route from source switch `s` to destination LID
//! `d` is fixed by the tables (it is the route of every end port attached to `s`, and of `s`'s
//! own traffic). A route's dependencies are the consecutive pairs of switch-to-switch channels
//! it takes, as in [`crate::check::cdg_acyclic`]. Several tables (the layers of a layered
//! multipath routing, one per LID offset) are layered together: their routes share the VLs.
//!
//! **Cycle breaking** ([`assign_layers`], DFSSSP §IV-B): every route starts in layer 0. While
//! the CDG of layer `i` has a cycle, the edge of the cycle induced by the fewest routes (the
//! "weakest" edge; first in cycle order on ties) is broken by moving every route of layer `i`
//! that induces it to layer `i + 1`. When layer `i` is acyclic, layer `i + 1` is processed, until
//! a layer is left empty. The number of layers reached is the number this heuristic *needs*;
//! when it exceeds the caller's maximum the error says how many were needed.
//!
//! **Balancing** (as OpenSM's dfsssp): when fewer layers are needed than allowed, the spare
//! layers are handed out one by one to the layer with the most paths per layer so far; the routes
//! of a layer given `k` layers are then spread over `k` consecutive layers (greedily, by weight:
//! the number of sources a route carries, its switch's end ports + the switch). A subset of an
//! acyclic layer's routes is acyclic, so no further check is needed.
//!
//! **Service levels.** The escape LIDs (LMC ≥ 1, Up*/Down*) keep their own SL / VL: SL
//! [`ESCAPE_SL`] → VL 1 (fabric-umad `driver::sl2vl`). Base layer `i` uses SL (and VL)
//! [`sl_of_layer`]`(i, lmc)`: with escape LIDs 0, 2, 3, … — the escape SL is skipped, so a
//! fabric with `V` data VLs offers `V - 1` base layers ([`max_base_layers`]); at LMC 0 there is
//! no escape LID and layer `i` is on SL `i`: `L` layers occupy exactly `L` data VLs.
//!
//! Routes are walked once (sequentially, in a fixed order), so the result never depends on the
//! thread count.

mod check;
mod cycles;
#[cfg(test)]
mod reference_tests;
mod routes;
#[cfg(test)]
mod tests;

pub use check::cdg_acyclic_per_layer;

use fabric_topology::{Fabric, Lid, SwitchId};

use crate::lft::Lfts;
use crate::lid::LidPlan;

/// The SL of the escape LIDs (must equal fabric-umad's `driver::sl2vl::ESCAPE_SL`).
pub const ESCAPE_SL: u8 = 1;

/// Highest number of data VLs InfiniBand offers (VL 0–14; VL 15 is management).
pub const IB_MAX_DATA_VLS: u8 = 15;

/// SL (and VL, the SL-to-VL map being the identity on them) of base layer `layer` of a LID
/// plan with LMC `lmc`: with escape LIDs (LMC ≥ 1) the escape SL [`ESCAPE_SL`] is skipped;
/// at LMC 0 the SL is the layer.
pub fn sl_of_layer(layer: u8, lmc: u8) -> u8 {
    if lmc == 0 || layer < ESCAPE_SL {
        layer
    } else {
        layer + 1
    }
}

/// How many base layers `data_vls` data VLs offer: one VL is kept for the escape LIDs when the
/// plan has them (LMC ≥ 1).
pub fn max_base_layers(data_vls: u8, lmc: u8) -> u8 {
    if lmc >= 1 {
        data_vls.saturating_sub(1)
    } else {
        data_vls
    }
}

/// Errors of [`assign_layers`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VlError {
    /// The routes need more layers than the caller allows.
    #[error(
        "the routing needs {needed} virtual layers (VLs) to be deadlock-free but only {available} are available \
         (DFSSSP cycle breaking)"
    )]
    TooFewVls {
        /// Layers allowed by the caller.
        available: u8,
        /// Layers the cycle breaking needed.
        needed: u8,
    },
    /// Zero layers allowed, or more than the InfiniBand data VLs.
    #[error("the number of virtual layers must be 1..={max}, got {got}")]
    BadMaximum { got: u8, max: u8 },
    /// The tables do not cover the fabric's switches or a destination LID.
    #[error("tables cover {have_switches} switches and LIDs below {have_lids} but the fabric has {switches} switches and LID {lid} is asked for")]
    TablesTooSmall {
        have_switches: usize,
        have_lids: usize,
        switches: usize,
        lid: Lid,
    },
    /// Tables of different shapes.
    #[error("the tables must all have the same shape")]
    ShapeMismatch,
    /// A route loops (the tables are not valid).
    #[error("the route from switch {switch} to LID {lid} loops: validate the tables first")]
    Loop { switch: u32, lid: Lid },
}

/// A route-to-layer assignment: `layer` of every (table, source switch, destination LID) route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VlLayering {
    /// Layers used after balancing (≤ the maximum given).
    pub num_layers: u8,
    /// Layers the cycle breaking needed before balancing.
    pub needed: u8,
    /// Number of tables layered together.
    pub num_tables: usize,
    /// Switches per table.
    pub num_switches: usize,
    /// Entries per (table, switch) row: the tables' row length.
    pub row_len: usize,
    /// Layer of each route, flat `[(table × switches + switch) × row_len + LID]`; 0 for entries
    /// that are not routes (no route, delivery, LIDs not layered).
    pub layer: Vec<u8>,
    /// Routes per layer (index = layer).
    pub routes_per_layer: Vec<u64>,
}

impl VlLayering {
    /// Layer of the route of `table` from switch `s` to `lid` (0 if not layered).
    pub fn layer_of(&self, table: usize, s: SwitchId, lid: Lid) -> u8 {
        let i = (table * self.num_switches + s.idx()) * self.row_len + lid as usize;
        self.layer.get(i).copied().unwrap_or(0)
    }
    /// SL of that route with a LID plan of LMC `lmc` ([`sl_of_layer`]).
    pub fn sl_of(&self, table: usize, s: SwitchId, lid: Lid, lmc: u8) -> u8 {
        sl_of_layer(self.layer_of(table, s, lid), lmc)
    }
}

/// The destination LIDs of the base set: every layer offset `0..layer_offsets` of every end
/// port (its base LID with LMC ≤ 1; the layers of `layered:K` with LMC ≥ 2, [`crate::lid`]) and
/// every switch LID (sorted, without 0 and duplicates). The escape offset is never included.
pub fn base_lids(fabric: &Fabric, lids: &LidPlan) -> Vec<Lid> {
    let n = lids.layer_offsets();
    let mut v: Vec<Lid> = fabric
        .end_port_ids()
        .map(|e| lids.base_lid(e))
        .filter(|&l| l != 0)
        .flat_map(|b| (0..n).map(move |o| b + o))
        .chain(fabric.switch_ids().map(|s| lids.switch_lid(s)).filter(|&l| l != 0))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Assigns every route of `tables` towards `dlids` to a layer, each layer's CDG acyclic, with at
/// most `max_layers` layers (see the module documentation for the algorithm).
pub fn assign_layers(fabric: &Fabric, tables: &[&Lfts], dlids: &[Lid], max_layers: u8) -> Result<VlLayering, VlError> {
    assign_layers_with(fabric, tables, dlids, max_layers, true)
}

/// [`assign_layers`] with the balancing of spare layers on (`balance`, OpenSM dfsssp's
/// behaviour) or off: exactly the layers the cycle breaking needed, the fewest VLs.
pub fn assign_layers_with(
    fabric: &Fabric,
    tables: &[&Lfts],
    dlids: &[Lid],
    max_layers: u8,
    balance: bool,
) -> Result<VlLayering, VlError> {
    if max_layers == 0 || max_layers > IB_MAX_DATA_VLS {
        return Err(VlError::BadMaximum {
            got: max_layers,
            max: IB_MAX_DATA_VLS,
        });
    }
    let r = routes::Routes::collect(fabric, tables, dlids)?;
    let mut layer = vec![0u8; r.len()];
    let needed = cycles::break_cycles(&r, &mut layer);
    if needed > max_layers as usize {
        return Err(VlError::TooFewVls {
            available: max_layers,
            needed: needed.min(255) as u8,
        });
    }
    let used = if balance {
        cycles::balance(&r, &mut layer, needed, max_layers as usize)
    } else {
        needed
    };
    let (ns, row_len) = (r.num_switches, r.row_len);
    let mut flat = vec![0u8; tables.len() * ns * row_len];
    let mut per = vec![0u64; used];
    for (i, rt) in r.routes.iter().enumerate() {
        flat[(rt.table as usize * ns + rt.src as usize) * row_len + rt.lid as usize] = layer[i];
        per[layer[i] as usize] += 1;
    }
    Ok(VlLayering {
        num_layers: used as u8,
        needed: needed as u8,
        num_tables: tables.len(),
        num_switches: ns,
        row_len,
        layer: flat,
        routes_per_layer: per,
    })
}

/// [`assign_layers`] of one table's base LIDs ([`base_lids`]): DFSSSP's layering of a routing.
pub fn layer_base(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, max_layers: u8) -> Result<VlLayering, VlError> {
    assign_layers(fabric, &[lfts], &base_lids(fabric, lids), max_layers)
}

/// [`layer_base`] without the balancing ([`assign_layers_with`]): the fewest layers.
pub fn layer_base_fewest(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, max_layers: u8) -> Result<VlLayering, VlError> {
    assign_layers_with(fabric, &[lfts], &base_lids(fabric, lids), max_layers, false)
}
