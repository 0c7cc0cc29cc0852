//! What a generation routed over several data VLs installs besides its tables (DFSSSP's VL
//! layering; issue 19, seed 003 §5.2): computed by [`crate::compute::vl`], kept with the
//! committed generation ([`crate::state::Generation::vl`]). A module of its own so that the
//! state does not depend on the computation.

use std::sync::Arc;

use fabric_sa::PathSls;
use fabric_southbound::DataVlPlan;

/// What a layered generation installs besides its tables.
#[derive(Clone, Debug, PartialEq)]
pub struct VlInstall {
    /// Base layers in use (each one VL).
    pub layers: u8,
    /// Data VLs the plan occupies (base layers and, with escape LIDs, the escape VL).
    pub data_vls: u8,
    /// Routes per layer (index = layer).
    pub routes_per_layer: Vec<u64>,
    /// The SL-to-VL tables every port must hold before the base tables go in.
    pub plan: DataVlPlan,
    /// Per-path SLs for the SA (PathRecord SL).
    pub path_sls: Arc<PathSls>,
    /// Layering time (milliseconds).
    pub layering_ms: f64,
}
