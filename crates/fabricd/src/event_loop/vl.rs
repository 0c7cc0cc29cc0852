//! A generation routed over several data VLs (DFSSSP's VL layering; issue 19, deliverable 4):
//! the SL-to-VL plan is programmed before the generation's base tables go in (direct upload:
//! before the upload; five-phase update: before the base stage, while traffic is on the escape
//! LIDs), the per-path SLs reach the SA once the base tables are in (before the subscribers
//! move back to the base LIDs) and stay with the committed generation.
//!
//! The layering itself is computed with the generation ([`crate::compute::vl`]); a layering
//! needing more VLs than the driver operates refuses the generation there (nothing written).
//! A driver that cannot program the plan ([`SouthboundDriver::program_data_vls`] fails) gets no
//! base table of the generation either: its upload reports every block failed with the
//! driver's error, so the generation is not committed and is retried (status `last_error`,
//! the failure counter).

use fabric_southbound::DataVlPlan;

use super::EventLoop;
use crate::compute::Computed;
use crate::upload::UploadOutcome;

impl EventLoop {
    /// The data-VL plan to program before the base tables of `c` (`None`: no layering, or
    /// the plan already in force).
    pub(super) fn data_vls_to_program(&self, c: &Computed) -> Option<DataVlPlan> {
        let plan = c.vl.as_ref()?.plan;
        (self.data_vls_in_force != Some(plan)).then_some(plan)
    }

    /// An upload came back: the plan it programmed is in force.
    pub(super) fn note_data_vls(&mut self, outcome: &UploadOutcome) {
        if let Some(p) = outcome.data_vls_programmed {
            self.data_vls_in_force = Some(p);
        }
    }

    /// The base tables of `c` are in: PathRecords report its per-path SLs (none without a
    /// layering).
    pub(super) fn publish_path_sls(&self, c: &Computed) {
        if let Some(sa) = &self.io.sa_service {
            sa.set_path_sls(c.vl.as_ref().map(|v| v.path_sls.clone()));
        }
    }

    /// Metrics and a log line of a committed generation's layering.
    pub(super) fn note_vl_layering(&self, g: &crate::state::Generation) {
        let (layers, data_vls) = g.vl.as_ref().map_or_else(
            || (0, fabric_routing::data_vls_of_layers(1, g.lids.lmc)),
            |v| (v.layers, v.data_vls),
        );
        self.io.telemetry.vl_layering(layers, data_vls);
        if let Some(v) = &g.vl {
            tracing::info!(
                generation = g.number,
                layers = v.layers,
                data_vls = v.data_vls,
                routes_per_layer = ?v.routes_per_layer,
                layering_ms = (v.layering_ms * 10.0).round() / 10.0,
                "VL layering installed: each layer on its own SL/VL, per-path SLs in PathRecords"
            );
        }
    }
}
