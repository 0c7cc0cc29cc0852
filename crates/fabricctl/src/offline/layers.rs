//! `analyze` of the routings that need virtual layers: DFSSSP (`--engine dfsssp`: the layers
//! its routes need, each layer's CDG checked) and the Slim Fly paper's layered multipath
//! routing (`--engine layered:K`, seed 003 §4–5: K tables, layer 0's congestion, the per-pair
//! path diversity, the VLs of the union of the K layers).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use fabric_metrics::MetricsOptions;
use fabric_routing::layered::{build_layers, layer_stats, layers_misfit, lmc_for_layers};
use fabric_routing::vl::{self, VlLayering};
use fabric_routing::{check, route_all_checked, EngineKind, Lfts, LidPlan, LidSet, RoutingContext};
use serde_json::{json, Value};

use super::{load, plan_lids, AnalyzeArgs, Loaded};
use crate::human::num;

/// The layering of a DFSSSP routing, as `analyze` reports it.
pub(super) struct LayersReport {
    pub layering: VlLayering,
    /// Each layer's CDG acyclic ([`check::cdg_acyclic_per_layer`]).
    pub acyclic: Vec<bool>,
    /// The escape LIDs' CDG acyclic (their own VL).
    pub escape_acyclic: bool,
    pub ms: f64,
    pub max_layers: u8,
    /// LMC of the LID plan (the layers' SLs skip the escape SL only with escape LIDs).
    pub lmc: u8,
}

impl LayersReport {
    /// Deadlock-free over its VLs: every base layer and the escape VL acyclic.
    pub fn deadlock_free(&self) -> bool {
        self.escape_acyclic && self.acyclic.iter().all(|&x| x)
    }

    pub fn json(&self) -> Value {
        json!({
            "needed": self.layering.needed,
            "used": self.layering.num_layers,
            "max": self.max_layers,
            "sls": (0..self.layering.num_layers).map(|i| vl::sl_of_layer(i, self.lmc)).collect::<Vec<_>>(),
            "routes_per_layer": self.layering.routes_per_layer,
            "acyclic_per_layer": self.acyclic,
            "escape_acyclic": self.escape_acyclic,
            "ms": self.ms,
        })
    }

    pub fn print(&self) {
        let escape = if self.lmc >= 1 {
            format!("; escape SL {} on its own VL", vl::ESCAPE_SL)
        } else {
            "; no escape LID at LMC 0".to_string()
        };
        println!(
            "vl_layers          {} needed, {} used of {} (SLs {:?}{escape})",
            self.layering.needed,
            self.layering.num_layers,
            self.max_layers,
            (0..self.layering.num_layers)
                .map(|i| vl::sl_of_layer(i, self.lmc))
                .collect::<Vec<_>>(),
        );
        println!("vl_acyclic         {:?} (per layer CDG)", self.acyclic);
        println!("vl_layering_ms     {}", num(self.ms));
    }
}

/// Base layers `--max-vls` data VLs offer with this plan (one kept for the escape LIDs).
fn max_layers(a: &AnalyzeArgs, lids: &LidPlan) -> Result<u8> {
    let m = vl::max_base_layers(a.max_vls, lids.lmc);
    if m == 0 {
        bail!(
            "--max-vls {} leaves no VL for the base LIDs (LMC {} keeps one for the escape LIDs)",
            a.max_vls,
            lids.lmc
        );
    }
    Ok(m)
}

/// `route --engine dfsssp`: the tables alone are not deadlock-free; says (stderr) how many
/// virtual layers (SLs) they need.
pub(super) fn route_note(kind: EngineKind, l: &Loaded, lids: &LidPlan, lfts: &Lfts) {
    if !matches!(
        kind,
        EngineKind::Dfsssp | EngineKind::MuSssp | EngineKind::Layered { .. }
    ) {
        if let EngineKind::Balanced { .. } = kind {
            match fabric_routing::vl_layering(kind, &l.fabric, lids, lfts, vl::IB_MAX_DATA_VLS) {
                Ok(Some(v)) => eprintln!("{kind}: routes on {} virtual layers (SLs)", v.num_layers),
                Ok(None) => {}
                Err(e) => eprintln!("fabricctl: warning: {kind}: {e}"),
            }
        }
        return;
    }
    let max = vl::max_base_layers(vl::IB_MAX_DATA_VLS, lids.lmc);
    let layering = if kind == EngineKind::MuSssp {
        fabric_routing::mu::layering(&l.fabric, lids, lfts, max)
    } else {
        vl::layer_base(&l.fabric, lids, lfts, max)
    };
    match layering {
        Ok(v) => eprintln!("{kind}: {} virtual layers (SLs) needed for deadlock freedom", v.needed),
        Err(e) => eprintln!("fabricctl: warning: {kind}: {e}"),
    }
}

/// DFSSSP's layering of `lfts` (base LIDs), checked per layer, when `analyze` routed with
/// dfsssp (`None` for other engines and read-back tables).
pub(super) fn dfsssp_layers(a: &AnalyzeArgs, l: &Loaded, lids: &LidPlan, lfts: &Lfts) -> Result<Option<LayersReport>> {
    let kind = a.engine.parse::<EngineKind>();
    let balanced = matches!(kind, Ok(EngineKind::Balanced { .. }));
    if a.lfts.is_some() || !(matches!(kind, Ok(EngineKind::Dfsssp | EngineKind::MuSssp)) || balanced) {
        return Ok(None);
    }
    let max = max_layers(a, lids)?;
    let t = Instant::now();
    let layering = match kind {
        // balanced:V: the engine's own destination → VL assignment, as the daemon installs it.
        Ok(k @ EngineKind::Balanced { .. }) => fabric_routing::vl_layering(k, &l.fabric, lids, lfts, a.max_vls)
            .context("balanced virtual layers")?
            .context("balanced needs a layering")?,
        // mu-sssp: its own layering (first fit or DFSSSP's, the fewer layers), as the daemon's.
        Ok(EngineKind::MuSssp) => {
            fabric_routing::mu::layering(&l.fabric, lids, lfts, max).context("mu-sssp virtual layers")?
        }
        _ => vl::layer_base(&l.fabric, lids, lfts, max).context("dfsssp virtual layers")?,
    };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let acyclic = check::cdg_acyclic_per_layer(&l.fabric, &[lfts], &vl::base_lids(&l.fabric, lids), &layering);
    Ok(Some(LayersReport {
        layering,
        acyclic,
        escape_acyclic: check::cdg_acyclic(&l.fabric, lids, lfts, LidSet::Escape),
        ms,
        max_layers: max,
        lmc: lids.lmc,
    }))
}

/// The LMC `route`/`analyze` use for `kind` without `--lmc`: for `layered:K` the smallest with
/// `K` layer offsets next to the escape offset (at least 1, [`lmc_for_layers`]); `None` for the
/// other engines (LMC 1 if it fits).
pub(super) fn default_lmc(kind: EngineKind) -> Result<Option<u8>> {
    match kind {
        EngineKind::Layered { k, .. } => match lmc_for_layers(usize::from(k)) {
            Some(l) => Ok(Some(l.max(1))),
            None => bail!("layered:{k}: more layers than LMC 7 has LID offsets (127)"),
        },
        _ => Ok(None),
    }
}

/// `analyze --engine layered:K`: Algorithm 1's K layers routed on the LID offsets of a plan with
/// `--lmc N` (default: the smallest LMC that has K layer offsets; layer `i` on offset `i`, the
/// escape on the last offset by Up*/Down*, as the daemon installs it: `route_all_checked`),
/// layer 0's metrics, the path diversity ([`layer_stats`]), and the VL layering of the union of
/// the offsets through the same entry as DFSSSP ([`vl::layer_base`] over [`vl::base_lids`]).
pub(super) fn analyze_layered(a: &AnalyzeArgs, kind: EngineKind) -> Result<()> {
    let EngineKind::Layered { k, seed } = kind else {
        bail!("analyze_layered: {kind} is not layered:K");
    };
    let k = usize::from(k);
    if a.lfts.is_some() || a.jobs.is_some() {
        bail!("--engine layered:K routes the file itself: --lfts and --jobs do not apply");
    }
    let l = load(&a.file, a.roots.as_deref())?;
    let lmc = match a.lmc {
        Some(x) => x,
        None => default_lmc(kind)?.unwrap_or(1),
    };
    let lids = plan_lids(&l.fabric, &Default::default(), Some(lmc), a.max_lid)?;
    if let Some(why) = layers_misfit(k, &lids) {
        bail!("--engine {kind} --lmc {lmc}: {why}");
    }
    let ctx = RoutingContext {
        fabric: &l.fabric,
        ranking: &l.ranking,
        lids: &lids,
    };
    let t = Instant::now();
    let (routed, rc) = route_all_checked(&ctx, kind, None)?;
    let route_ms = t.elapsed().as_secs_f64() * 1e3;
    if !rc.reason.is_empty() {
        eprintln!("fabricctl: warning: routing validity: {}", rc.reason);
    }
    let lfts = &routed.lfts;
    // The layers themselves (deterministic: the same as on the offsets) for their statistics.
    let lr = build_layers(&l.fabric, &lids, k, seed)?;
    // Each layer's own table fills offset 0 only: checked as a one-LID-per-port plan.
    let single = LidPlan { lmc: 0, ..lids.clone() };
    let valid: Vec<bool> = lr
        .tables
        .iter()
        .map(|t| check::validity(&l.fabric, &single, t).valid)
        .collect();
    let all_valid = check::validity(&l.fabric, &lids, lfts).valid;
    let st = layer_stats(&l.fabric, &lr);
    let dl = vl::base_lids(&l.fabric, &lids);
    let max = max_layers(a, &lids)?;
    let t = Instant::now();
    let layering = vl::layer_base(&l.fabric, &lids, lfts, max);
    let vl_ms = t.elapsed().as_secs_f64() * 1e3;
    let acyclic = layering
        .as_ref()
        .map(|x| check::cdg_acyclic_per_layer(&l.fabric, &[lfts], &dl, x))
        .unwrap_or_default();
    let escape_acyclic = check::cdg_acyclic(&l.fabric, &lids, lfts, LidSet::Escape);
    let opts = MetricsOptions {
        random_perms: a.rp,
        seed: a.seed,
        all_to_all: !a.no_a2a,
        shifts: false,
    };
    let m = fabric_metrics::compute(&l.fabric, &lids, lfts, &opts);
    let vls = match &layering {
        Ok(x) => json!({"needed": x.needed, "used": x.num_layers, "max": max,
            "sls": (0..x.num_layers).map(|i| vl::sl_of_layer(i, lids.lmc)).collect::<Vec<_>>(),
            "routes_per_layer": x.routes_per_layer, "acyclic_per_layer": acyclic,
            "escape_acyclic": escape_acyclic, "ms": vl_ms}),
        Err(e) => json!({"error": e.to_string(), "max": max}),
    };
    let offsets = lids.layer_offsets();
    if a.json {
        let v = json!({
            "file": a.file.display().to_string(),
            "engine": format!("layered:{k}:{seed}"),
            "switches": l.fabric.num_switches(),
            "nodes": l.fabric.num_end_ports(),
            "layers": k,
            "lmc": lids.lmc,
            "lmc_needed": lmc_for_layers(k),
            "layer_offsets": offsets,
            "escape_offset": lids.escape_offset(),
            "valid": all_valid,
            "valid_per_layer": valid,
            "fallback": rc.fallback.name(),
            "route_ms": route_ms,
            "layer0": {"mu_rp": {"median": m.mu_rp.median, "q1": m.mu_rp.q1, "q39": m.mu_rp.q39},
                       "mu_a2a": m.mu_a2a, "xi": m.xi},
            "paths": {
                "pairs": st.pairs, "mean_distinct": st.mean_distinct, "mean_disjoint": st.mean_disjoint,
                "share_3_disjoint": st.share_3_disjoint, "share_minimal": st.share_minimal,
                "share_almost_minimal": st.share_almost_minimal, "max_hops": st.max_hops,
                "mean_hops": st.mean_hops, "a2a_link_load_layer0": st.a2a_layer0,
                "a2a_link_load_spread": st.a2a_multipath,
            },
            "vl_layers": vls,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("file               {}", a.file.display());
        println!(
            "engine             layered:{k}:{seed} (LMC {}: layers on LID offsets 0..{offsets}{}, escape on offset {})",
            lids.lmc,
            if offsets as usize > k {
                format!(" (offset i: layer i mod {k})")
            } else {
                String::new()
            },
            lids.escape_offset().map_or("-".to_string(), |o| o.to_string())
        );
        println!("valid              {all_valid} (every offset); per layer {valid:?}");
        println!("route_ms           {}", num(route_ms));
        println!(
            "layer0             mu_rp median {} q1 {} q39 {} (r = {}), mu_a2a {}",
            num(m.mu_rp.median),
            num(m.mu_rp.q1),
            num(m.mu_rp.q39),
            a.rp,
            m.mu_a2a
        );
        println!(
            "paths              {:.2} distinct, {:.2} disjoint per switch pair, {:.1} % with >= 3 disjoint; {:.1} % minimal, {:.1} % almost minimal, max {} hops",
            st.mean_distinct,
            st.mean_disjoint,
            st.share_3_disjoint * 100.0,
            st.share_minimal * 100.0,
            st.share_almost_minimal * 100.0,
            st.max_hops
        );
        println!(
            "a2a_link_load      layer 0 alone {}, spread over the {k} layers {}",
            st.a2a_layer0,
            num(st.a2a_multipath)
        );
        match &layering {
            Ok(x) => println!(
                "vl_layers          {} needed, {} used of {max} for the union of the {k} layers; acyclic per layer {acyclic:?} ({} ms)",
                x.needed,
                x.num_layers,
                num(vl_ms)
            ),
            Err(e) => println!("vl_layers          {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::default_lmc;
    use fabric_routing::EngineKind;

    #[test]
    fn layered_default_lmc_has_its_offsets() {
        let l = |k| EngineKind::Layered { k, seed: 0 };
        assert_eq!(default_lmc(EngineKind::Dmodc).unwrap(), None);
        assert_eq!(default_lmc(l(1)).unwrap(), Some(1));
        assert_eq!(default_lmc(l(3)).unwrap(), Some(2));
        assert_eq!(default_lmc(l(4)).unwrap(), Some(3));
        assert!(default_lmc(l(128)).is_err());
    }
}
