//! The layered multipath routing as a [`RoutingEngine`] (`layered:K[:SEED]`, Slim Fly paper
//! seed 003 §5.1): Algorithm 1's `K` layers ([`build_layers`]) written into one table over the
//! plan's LID offsets, layer `i` on offset `i` of every end port (offsets `≥ K` repeat layer
//! `i mod K`), switch LIDs by layer 0. The plan must have `K` layer offsets
//! ([`LidPlan::layer_offsets`]: `2^LMC − 1` with LMC ≥ 1, the last offset being the escape).

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;
use crate::lid::LidPlan;

use super::{build_layers, LayeredError};

/// `layered:K[:SEED]`: the engine of [`crate::EngineKind::Layered`].
#[derive(Copy, Clone, Debug)]
pub struct Layered {
    /// Number of layers.
    pub k: usize,
    /// Seed of Algorithm 1's order within a priority.
    pub seed: u64,
}

/// The smallest LMC whose plan has `k` layer offsets next to the escape offset (`k = 1`: LMC 0,
/// otherwise the smallest `l` with `2^l − 1 ≥ k`); `None` when `k > 127`.
pub fn lmc_for_layers(k: usize) -> Option<u8> {
    if k <= 1 {
        return Some(0);
    }
    (1..=7u8).find(|&l| (1usize << l) > k)
}

/// Why `k` layers do not fit `lids` (`None`: they fit, `k ≤` [`LidPlan::layer_offsets`]).
pub fn layers_misfit(k: usize, lids: &LidPlan) -> Option<String> {
    let have = lids.layer_offsets() as usize;
    (k > have).then(|| {
        let need = lmc_for_layers(k).map_or("more than LMC 7 offers".to_string(), |l| format!("LMC {l}"));
        format!(
            "{k} layers need {k} LID offsets per end port but LMC {} has {have} (the last offset is the escape LID \
             with LMC ≥ 1): use {need}",
            lids.lmc
        )
    })
}

impl RoutingEngine for Layered {
    fn name(&self) -> &'static str {
        "layered"
    }

    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        let unsupported = |reason: String| RoutingError::Unsupported {
            engine: "layered",
            reason,
        };
        if set != LidSet::Base {
            return Err(unsupported(
                "the escape LIDs are routed by Up*/Down*, not by the layers".into(),
            ));
        }
        if let Some(why) = layers_misfit(self.k, ctx.lids) {
            return Err(unsupported(why));
        }
        let r = build_layers(ctx.fabric, ctx.lids, self.k, self.seed).map_err(|e| match e {
            LayeredError::PlanMismatch => unsupported(e.to_string()),
            LayeredError::BadLayerCount(_) => unsupported(e.to_string()),
        })?;
        write_offsets(ctx.lids, &r.tables, lfts);
        Ok(())
    }
}

/// Writes layer `o mod k` on offset `o` of every end port and layer 0's switch-LID entries.
pub(crate) fn write_offsets(lids: &LidPlan, tables: &[Lfts], lfts: &mut Lfts) {
    let n = lids.layer_offsets();
    use rayon::prelude::*;
    lfts.par_rows_mut().enumerate().for_each(|(s, row)| {
        let sw = fabric_topology::SwitchId(s as u32);
        for &l in lids.switch_lid.iter().filter(|&&l| l != 0) {
            row[l as usize] = tables[0].get(sw, l);
        }
        for &b in lids.end_port_base.iter().filter(|&&b| b != 0) {
            for o in 0..n {
                row[(b + o) as usize] = tables[o as usize % tables.len()].get(sw, b);
            }
        }
    });
}
