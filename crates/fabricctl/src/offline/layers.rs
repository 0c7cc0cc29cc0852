//! `analyze` of the routings that need virtual layers: DFSSSP (`--engine dfsssp`: the layers
//! its routes need, each layer's CDG checked) and the Slim Fly paper's layered multipath
//! routing (`--engine layered:K`, seed 003 §4–5: K tables, layer 0's congestion, the per-pair
//! path diversity, the VLs of the union of the K layers).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use fabric_metrics::MetricsOptions;
use fabric_routing::layered::{build_layers, layer_stats};
use fabric_routing::vl::{self, VlLayering};
use fabric_routing::{check, Lfts, LidPlan, LidSet};
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
            "sls": (0..self.layering.num_layers).map(vl::sl_of_layer).collect::<Vec<_>>(),
            "routes_per_layer": self.layering.routes_per_layer,
            "acyclic_per_layer": self.acyclic,
            "escape_acyclic": self.escape_acyclic,
            "ms": self.ms,
        })
    }

    pub fn print(&self) {
        println!(
            "vl_layers          {} needed, {} used of {} (SLs {:?}; escape SL {} on its own VL)",
            self.layering.needed,
            self.layering.num_layers,
            self.max_layers,
            (0..self.layering.num_layers).map(vl::sl_of_layer).collect::<Vec<_>>(),
            vl::ESCAPE_SL
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
pub(super) fn route_note(kind: fabric_routing::EngineKind, l: &Loaded, lids: &LidPlan, lfts: &Lfts) {
    if kind != fabric_routing::EngineKind::Dfsssp {
        return;
    }
    let max = vl::max_base_layers(vl::IB_MAX_DATA_VLS, lids.lmc);
    match vl::layer_base(&l.fabric, lids, lfts, max) {
        Ok(v) => eprintln!("dfsssp: {} virtual layers (SLs) needed for deadlock freedom", v.needed),
        Err(e) => eprintln!("fabricctl: warning: dfsssp: {e}"),
    }
}

/// DFSSSP's layering of `lfts` (base LIDs), checked per layer, when `analyze` routed with
/// dfsssp (`None` for other engines and read-back tables).
pub(super) fn dfsssp_layers(a: &AnalyzeArgs, l: &Loaded, lids: &LidPlan, lfts: &Lfts) -> Result<Option<LayersReport>> {
    if a.lfts.is_some() || a.engine.parse::<fabric_routing::EngineKind>() != Ok(fabric_routing::EngineKind::Dfsssp) {
        return Ok(None);
    }
    let max = max_layers(a, lids)?;
    let t = Instant::now();
    let layering = vl::layer_base(&l.fabric, lids, lfts, max).context("dfsssp virtual layers")?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let acyclic = check::cdg_acyclic_per_layer(&l.fabric, &[lfts], &vl::base_lids(&l.fabric, lids), &layering);
    Ok(Some(LayersReport {
        layering,
        acyclic,
        escape_acyclic: check::cdg_acyclic(&l.fabric, lids, lfts, LidSet::Escape),
        ms,
        max_layers: max,
    }))
}

/// `layered:K` (or `layered:K:SEED`) → (K, seed).
pub(super) fn layered_spec(engine: &str) -> Result<Option<(usize, u64)>> {
    let Some(rest) = engine.trim().strip_prefix("layered") else {
        return Ok(None);
    };
    let mut it = rest.strip_prefix(':').unwrap_or(rest).split(':');
    let k = it.next().filter(|s| !s.is_empty()).unwrap_or("4");
    let k: usize = k
        .parse()
        .with_context(|| format!("`{engine}`: expected layered:K[:SEED]"))?;
    let seed = match it.next() {
        Some(s) => s.parse().with_context(|| format!("`{engine}`: bad seed"))?,
        None => 0,
    };
    Ok(Some((k, seed)))
}

/// `analyze --engine layered:K`: Algorithm 1's K layers on one-LID-per-end-port tables (LMC ≥ 2
/// is not in the LID plan: the K tables stand for LID offsets 0..K), layer 0's metrics, the
/// path diversity, and the VL layering of the union.
pub(super) fn analyze_layered(a: &AnalyzeArgs, k: usize, seed: u64) -> Result<()> {
    if a.lfts.is_some() || a.jobs.is_some() {
        bail!("--engine layered:K routes the file itself: --lfts and --jobs do not apply");
    }
    let l = load(&a.file, a.roots.as_deref())?;
    let lids = plan_lids(&l.fabric, &Default::default(), Some(0), a.max_lid)?;
    let t = Instant::now();
    let lr = build_layers(&l.fabric, &lids, k, seed)?;
    let route_ms = t.elapsed().as_secs_f64() * 1e3;
    let valid: Vec<bool> = lr
        .tables
        .iter()
        .map(|t| check::validity(&l.fabric, &lids, t).valid)
        .collect();
    let st = layer_stats(&l.fabric, &lr);
    let tables: Vec<&Lfts> = lr.tables.iter().collect();
    let dl = vl::base_lids(&l.fabric, &lids);
    // LMC ≥ 1 in a deployment: the escape VL is kept apart as for DFSSSP.
    let max = vl::max_base_layers(a.max_vls, 1).max(1);
    let t = Instant::now();
    let layering = vl::assign_layers(&l.fabric, &tables, &dl, max);
    let vl_ms = t.elapsed().as_secs_f64() * 1e3;
    let acyclic = layering
        .as_ref()
        .map(|x| check::cdg_acyclic_per_layer(&l.fabric, &tables, &dl, x))
        .unwrap_or_default();
    let opts = MetricsOptions {
        random_perms: a.rp,
        seed: a.seed,
        all_to_all: !a.no_a2a,
        shifts: false,
    };
    let m = fabric_metrics::compute(&l.fabric, &lids, &lr.tables[0], &opts);
    let vls = match &layering {
        Ok(x) => json!({"needed": x.needed, "used": x.num_layers, "max": max,
            "routes_per_layer": x.routes_per_layer, "acyclic_per_layer": acyclic, "ms": vl_ms}),
        Err(e) => json!({"error": e.to_string(), "max": max}),
    };
    if a.json {
        let v = json!({
            "file": a.file.display().to_string(),
            "engine": format!("layered:{k}:{seed}"),
            "switches": l.fabric.num_switches(),
            "nodes": l.fabric.num_end_ports(),
            "layers": k,
            "lmc_needed": k.next_power_of_two().trailing_zeros(),
            "valid_per_layer": valid,
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
            "engine             layered:{k}:{seed} (LID offsets 0..{k}, LMC {} needed)",
            k.next_power_of_two().trailing_zeros()
        );
        println!("valid_per_layer    {valid:?}");
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
    use super::layered_spec;

    #[test]
    fn layered_engine_names_parse() {
        assert_eq!(layered_spec("dfsssp").unwrap(), None);
        assert_eq!(layered_spec("layered").unwrap(), Some((4, 0)));
        assert_eq!(layered_spec("layered:8").unwrap(), Some((8, 0)));
        assert_eq!(layered_spec("layered:2:7").unwrap(), Some((2, 7)));
        assert!(layered_spec("layered:x").is_err());
        assert!(layered_spec("layered:2:y").is_err());
    }
}
