//! mu-sssp's route time on the direct topologies of issue 19 (a harness-less bench).
//!
//! For each fabric (generator notation; complete and with the cable cuts of
//! `tests/direct-compare.sh`: 1 % and 5 % of the inter-switch cables, seed 1) and LMC 0, runs
//! `MuSssp::route_stats` once (warm-up; the statistics printed), then the daemon's call
//! `RoutingEngine::route` (its candidates and their layerings, without the statistics; until
//! 28 Nov 2026, `route_stats` was timed) `RUNS` times (default 20), then `mu::layering`
//! of the kept tables (what the daemon adds), and prints the median and minimum wall time, the process CPU time (user + system) per run, the
//! kept candidate, mu, layers and a digest of the tables and of the layering (to compare outputs
//! across commits).
//!
//! `SPECS='SLIMFLY(5;4)' CUTS='0 1 5' RUNS=20 cargo bench -p fabric-routing --bench mu` (`CUTS`:
//! the percentages to run, default all three). `THREADS=n` runs everything inside a rayon pool
//! of `n` threads (`pool.install`, as the daemon's routing pool): with `THREADS=1` the engine's
//! `rayon::join` runs on the calling thread, so callgrind's `--toggle-collect` of `route` counts
//! all of its work.

use std::hash::{Hash, Hasher};
use std::time::Instant;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, mu, Guid2Lid, Lfts, LidSet, MuSssp, RoutingContext, RoutingEngine, IB_MAX_UNICAST_LID,
};
use fabric_topology::gen::{generate_str, Degrade};
use fabric_topology::SwitchId;

/// (spec, cables cut at 1 %, at 5 %): tests/direct-compare.sh's files.
const FABRICS: [(&str, usize, usize); 4] = [
    ("SLIMFLY(5;4)", 2, 9),
    ("HYPERX(8,8;4)", 4, 22),
    ("SLIMFLY(7)", 5, 27),
    ("DRAGONFLY(3)", 5, 23),
];

fn cpu_ms() -> f64 {
    // utime + stime of the process from /proc (10 ms ticks; divided over many runs).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ut: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let st: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    (ut + st) * 10.0
}

fn main() {
    let threads: Option<usize> = std::env::var("THREADS").ok().and_then(|v| v.parse().ok());
    match threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .expect("pool")
            .install(run_all),
        None => run_all(),
    }
}

fn run_all() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
        .max(1);
    let only = std::env::var("SPECS").ok();
    let cuts = std::env::var("CUTS").ok();
    println!("| fabric | route ms median (min) | CPU ms/run | layering ms | kept | mu | layers | rounds run (destinations re-routed), port order mu → rounds mu (lower bound) | digest |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (spec, c1, c5) in FABRICS {
        if only
            .as_deref()
            .is_some_and(|o| !o.split_whitespace().any(|s| s == spec))
        {
            continue;
        }
        for (label, cut, pct) in [("", 0, "0"), (" 1 %", c1, "1"), (" 5 %", c5, "5")] {
            if cuts.as_deref().is_some_and(|o| !o.split_whitespace().any(|s| s == pct)) {
                continue;
            }
            let d = (cut > 0).then_some(Degrade {
                remove_links: cut,
                remove_switches: 0,
                seed: 1,
            });
            let f = generate_str(spec, d.as_ref()).expect("generate");
            let lids = assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).expect("lids");
            let ranking = rank(&f, &RankOptions::default());
            let ctx = RoutingContext {
                fabric: &f,
                ranking: &ranking,
                lids: &lids,
            };
            let fresh = || Lfts::new(f.num_switches(), lids.top());
            let mut lfts = fresh();
            let st = MuSssp.route_stats(&ctx, &mut lfts).expect("route");
            let mut ms = Vec::with_capacity(runs);
            let c0 = cpu_ms();
            for _ in 0..runs {
                let mut t = fresh();
                let t0 = Instant::now();
                MuSssp.route(&ctx, LidSet::Base, &mut t).expect("route");
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
                assert!(t == lfts, "{spec}{label}: route and route_stats differ");
            }
            let cpu = (cpu_ms() - c0) / runs as f64;
            ms.sort_by(f64::total_cmp);
            let t0 = Instant::now();
            let layering = mu::layering(&f, &lids, &lfts, 8).ok();
            let lay_ms = t0.elapsed().as_secs_f64() * 1e3;
            let layers = layering.as_ref().map_or(0, |l| l.num_layers);
            let mut h = std::collections::hash_map::DefaultHasher::new();
            // The layer of every route too: a change of layering shows in the digest.
            if let Some(l) = &layering {
                l.layer.hash(&mut h);
            }
            for s in 0..lfts.num_switches() {
                for lid in 0..lfts.row_len() {
                    lfts.get(SwitchId(s as u32), lid as u32).hash(&mut h);
                }
            }
            println!(
                "| {spec}{label} | {:.2} ({:.2}) | {cpu:.2} | {lay_ms:.2} | {} | {} | {layers} | {} ({}), {} → {} ({}) | {:016x} |",
                ms[ms.len() / 2],
                ms[0],
                st.candidate,
                st.mu,
                st.rounds_run,
                st.rerouted,
                st.port_order_mu,
                st.rounds_mu,
                st.lower_bound,
                h.finish()
            );
        }
    }
}
