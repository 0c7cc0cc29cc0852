//! The VL layering of a generation whose engine needs one (DFSSSP; issue 19, deliverable 4):
//! computed on the routing pool after the validity repair, on the tables actually installed
//! ([`fabric_routing::vl_layering`], the fewest layers), refused when the layers exceed the
//! data VLs the driver can operate, and turned into what the daemon installs with the tables:
//! the SL-to-VL plan (base layer `i` on SL = VL [`fabric_routing::vl::sl_of_layer`]`(i, lmc)`:
//! with escape LIDs [`DataVlPlan::identity`], layers on SLs 0, 2, 3, … and the escape SL on
//! its VL; at LMC 0 [`DataVlPlan::identity_without_escape`], layer `i` on SL/VL `i`, exactly
//! `layers` data VLs) and the per-path SLs
//! PathRecords report ([`PathSls`]: SL of the route from a path's first switch to its DLID).

use std::sync::Arc;

use fabric_routing::vl::{VlError, VlLayering, ESCAPE_SL, IB_MAX_DATA_VLS};
use fabric_routing::{data_vls_of_layers, EngineKind, Lfts, LidPlan};
use fabric_sa::PathSls;
use fabric_southbound::DataVlPlan;
use fabric_topology::Fabric;

pub use crate::vl_plan::VlInstall;

/// Why a layered generation is refused (nothing of it is installed).
#[derive(Debug, thiserror::Error)]
pub enum VlRefusal {
    /// The layering needs more data VLs than the driver's ports operate (or its inputs are
    /// not the tables of the fabric).
    #[error(
        "engine {engine} needs its routes on several virtual lanes and {reason} (driver data VL capacity: {capacity}); \
         nothing installed: lower the layers needed (another engine, e.g. updown, is deadlock-free on one VL) or use \
         hardware with more operational VLs"
    )]
    Layering {
        engine: EngineKind,
        reason: VlError,
        capacity: String,
        /// Layers the cycle breaking needed (0 when unknown).
        needed: u8,
    },
}

impl VlRefusal {
    /// Layers needed, when the refusal comes from too few VLs.
    pub fn needed(&self) -> u8 {
        match self {
            VlRefusal::Layering { needed, .. } => *needed,
        }
    }
}

/// The layering of `lfts` routed by `engine` (`None` for engines deadlock-free on one VL),
/// within `capacity` data VLs (`None`: the driver does not know; the InfiniBand maximum is
/// assumed and `program_data_vls` decides).
pub fn layer(
    engine: EngineKind,
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
    capacity: Option<u8>,
) -> Result<Option<VlInstall>, VlRefusal> {
    if !engine.needs_vl_layering() {
        return Ok(None);
    }
    let t = std::time::Instant::now();
    let max = capacity.unwrap_or(IB_MAX_DATA_VLS);
    let refuse = |reason: VlError| {
        let needed = match &reason {
            VlError::TooFewVls { needed, .. } => *needed,
            _ => 0,
        };
        VlRefusal::Layering {
            engine,
            reason,
            capacity: capacity.map_or_else(|| "unknown".to_string(), |c| c.to_string()),
            needed,
        }
    };
    if fabric_routing::vl::max_base_layers(max, lids.lmc) == 0 {
        // One data VL with escape LIDs (or none): no base layer besides the escape VL (the
        // layering would fail with a bad maximum; say it in the same terms).
        let needed = fabric_routing::vl_layering(engine, fabric, lids, lfts, IB_MAX_DATA_VLS)
            .ok()
            .flatten()
            .map_or(1, |l| l.needed);
        return Err(refuse(VlError::TooFewVls { available: 0, needed }));
    }
    let l = fabric_routing::vl_layering(engine, fabric, lids, lfts, max)
        .map_err(refuse)?
        .expect("needs_vl_layering");
    if let EngineKind::Balanced { vls } = engine {
        if l.num_layers > vls {
            // `balanced` gives at most `vls` layers; more means its destination → VL map did
            // not hold on the installed tables (the validity repair changed routes) and
            // DFSSSP's cycle breaking layered them instead.
            tracing::warn!(
                engine = %engine,
                budget = vls,
                layers = l.num_layers,
                "the balanced engine's VL budget does not hold on the installed tables (the validity repair \
                 changed routes): DFSSSP's cycle breaking layered them, using more VLs than the budget"
            );
        }
    }
    let data_vls = data_vls_of_layers(l.num_layers, lids.lmc);
    if data_vls > max {
        return Err(refuse(VlError::TooFewVls {
            available: fabric_routing::vl::max_base_layers(max, lids.lmc),
            needed: l.num_layers,
        }));
    }
    let path_sls = Arc::new(path_sls(fabric, lids, lfts, &l));
    Ok(Some(VlInstall {
        layers: l.num_layers,
        data_vls,
        routes_per_layer: l.routes_per_layer.clone(),
        plan: if lids.lmc >= 1 {
            DataVlPlan::identity(data_vls)
        } else {
            DataVlPlan::identity_without_escape(data_vls)
        },
        path_sls,
        layering_ms: t.elapsed().as_secs_f64() * 1e3,
    }))
}

/// The per-path SLs of layering `l` of `lfts` (seed 003 §5.2; the contract of [`PathSls`]):
/// one row per switch (by node GUID), the SL of its route to every LID of the tables
/// ([`VlLayering::sl_of`] with the plan's LMC); escape LIDs on [`ESCAPE_SL`].
pub fn path_sls(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, l: &VlLayering) -> PathSls {
    let row_len = lfts.row_len();
    let ns = fabric.num_switches();
    // Table 0 of the layering has the tables' shape: its rows map through the SL of each layer.
    let sl_of: Vec<u8> = (0..=u8::MAX)
        .map(|x| fabric_routing::vl::sl_of_layer(x.min(IB_MAX_DATA_VLS), lids.lmc))
        .collect();
    let sl: Vec<u8> = if l.row_len == row_len && l.num_switches == ns && l.layer.len() >= ns * row_len {
        l.layer[..ns * row_len].iter().map(|&x| sl_of[x as usize]).collect()
    } else {
        let mut sl = vec![0u8; ns * row_len];
        for s in fabric.switch_ids() {
            let row = &mut sl[s.idx() * row_len..(s.idx() + 1) * row_len];
            for (lid, v) in row.iter_mut().enumerate() {
                *v = l.sl_of(0, s, lid as fabric_topology::Lid, lids.lmc);
            }
        }
        sl
    };
    let mut sl = sl;
    for e in fabric.end_port_ids() {
        if let Some(x) = lids.escape_lid(e).map(|x| x as usize).filter(|&x| x < row_len) {
            for r in 0..ns {
                sl[r * row_len + x] = ESCAPE_SL;
            }
        }
    }
    PathSls {
        row_of_switch: fabric.switch_ids().map(|s| (fabric.switch(s).guid, s.0)).collect(),
        row_len,
        sl,
    }
}

#[cfg(test)]
#[path = "vl_tests.rs"]
mod tests;
