//! Route time of every engine (issue 16, benchmark table): a harness-less bench that prints a
//! Markdown table.
//!
//! For each engine of [`ENGINE_NAMES`] (seeded ones with seed 1) on the 8 640-node
//! `PGFT(3;24,12,30;1,12,12;1,2,1)`, complete and with 2 % of its cables removed (seed 1), on a
//! rayon pool of 2 threads:
//!
//! * `engine ms`: ranking + the engine on the base LIDs and switch LIDs (`LidSet::Base`), LMC 0
//!   (one LID per end port, as OpenSM routes by default), into a table allocated once;
//! * `fabricd ms`: what a fabricd generation spends routing with that engine: ranking +
//!   [`route_all_checked`] with LMC 1 (base LIDs by the engine, escape LIDs by Up*/Down*, the
//!   validity check and the Up*/Down* repair of what the engine left unreachable).
//!
//! Each is the median (min–max) of `ROUNDS` runs (default 5) after one warm-up run. An engine
//! that refuses the fabric (`RoutingError::Unsupported`, Dmodk on a degraded PGFT, ...) is
//! reported as "n/a (reason)". Environment: `ENGINES` (space-separated names, default all),
//! `ROUNDS`, `THREADS` (default 2), `SPEC` (default the 8 640-node PGFT), `FABRICS` (the
//! percentages of cables removed to run, default `0 2`), `FABRICD=0` (skip the `fabricd ms`
//! column, e.g. to profile the engine alone).
//!
//! `engine CPU ms` is the process's CPU time (user + system, every thread of the pool) per run
//! of the engine column, over the timed runs (10 ms ticks from `/proc/self/stat`, so use enough
//! `ROUNDS`): on a loaded machine it moves less than the wall time.
//!
//! `cargo bench -p fabric-routing --bench engines`

mod support;

use std::time::Instant;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, engine, route_all_checked, EngineKind, Guid2Lid, Lfts, LidPlan, LidSet, RoutingContext, RoutingError,
    ENGINE_NAMES, IB_MAX_UNICAST_LID,
};
use fabric_topology::Fabric;
use support::{fabric, pool, PGFT_8640};

/// Ranking + the engine on the base LIDs (the engine's own work).
fn engine_only(f: &Fabric, kind: EngineKind, lids: &LidPlan, lfts: &mut Lfts) -> Result<(), RoutingError> {
    let ranking = rank(f, &RankOptions::default());
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids,
    };
    engine(kind).route(&ctx, LidSet::Base, lfts)
}

/// Ranking + the whole checked routing of a fabricd generation.
fn generation(f: &Fabric, kind: EngineKind, lids: &LidPlan) -> Result<String, RoutingError> {
    let ranking = rank(f, &RankOptions::default());
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids,
    };
    let (_, check) = route_all_checked(&ctx, kind, None)?;
    Ok(check.fallback.name().to_string())
}

/// "median (min–max)" of `rounds` timed runs of `run` after one warm-up run, or the error of
/// the warm-up run.
fn time<T>(rounds: usize, mut run: impl FnMut() -> Result<T, RoutingError>) -> Result<(String, T), RoutingError> {
    let first = run()?;
    let mut ms: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let r = run();
            let d = t.elapsed().as_secs_f64() * 1e3;
            r.map(|_| d)
        })
        .collect::<Result<_, _>>()?;
    ms.sort_by(f64::total_cmp);
    let med = ms[ms.len() / 2];
    let text = if ms.len() == 1 {
        format!("{med:.1}")
    } else {
        format!("{med:.1} ({:.1}–{:.1})", ms[0], ms[ms.len() - 1])
    };
    Ok((text, first))
}

/// "n/a (reason)", the reason cut at 100 characters for the table.
fn na(e: &RoutingError) -> String {
    let text = e.to_string().replace('|', "/");
    match text.char_indices().nth(100) {
        Some((i, _)) => format!("n/a ({}…)", &text[..i]),
        None => format!("n/a ({text})"),
    }
}

/// CPU time (user + system) of the whole process so far, ms (10 ms ticks).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) * 10.0
}

fn main() {
    // `cargo bench` passes `--bench` (and a filter, if any): take the first non-flag argument as
    // an engine filter, like `cargo bench --bench engines dmodc`.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let rounds: usize = env("ROUNDS").and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let threads: usize = env("THREADS").and_then(|v| v.parse().ok()).unwrap_or(2).max(1);
    let spec = env("SPEC").unwrap_or_else(|| PGFT_8640.to_string());
    let names: Vec<String> = match env("ENGINES") {
        Some(v) => v.split_whitespace().map(str::to_string).collect(),
        None => ENGINE_NAMES.iter().map(|s| (*s).to_string()).collect(),
    };
    let fabrics = env("FABRICS").unwrap_or_else(|| "0 2".to_string());
    let with_fabricd = env("FABRICD").is_none_or(|v| v != "0");
    let p = pool(threads);
    let mut rows = Vec::new();
    for (label, pct) in [("complete", 0), ("2 % of cables removed", 2)] {
        if !fabrics.split_whitespace().any(|v| v == pct.to_string()) {
            continue;
        }
        let f = fabric(&spec, pct);
        let lids0 = assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).expect("LIDs, LMC 0");
        let lids1 = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).expect("LIDs, LMC 1");
        let mut lfts = Lfts::new(f.num_switches(), lids0.top());
        for name in &names {
            if filter.as_deref().is_some_and(|flt| !name.contains(flt)) {
                continue;
            }
            let kind: EngineKind = match name.parse::<EngineKind>() {
                Ok(k) => k.with_seed(1),
                Err(e) => {
                    rows.push(format!("| {label} | {name} | n/a ({e}) | | | |"));
                    continue;
                }
            };
            let (eng, cpu, gen) = p.install(|| {
                let c0 = cpu_ms();
                let eng = time(rounds, || engine_only(&f, kind, &lids0, &mut lfts));
                // The warm-up run is in the CPU time too.
                let cpu = (cpu_ms() - c0) / (rounds + 1) as f64;
                let gen = if with_fabricd {
                    time(rounds, || generation(&f, kind, &lids1))
                } else {
                    Ok((String::new(), String::new()))
                };
                (eng, cpu, gen)
            });
            let (eng, cpu) = eng.map_or_else(|e| (na(&e), String::new()), |(t, ())| (t, format!("{cpu:.1}")));
            let (gen, fallback) = gen.map_or_else(|e| (na(&e), String::new()), |(t, fb)| (t, fb));
            let row = format!("| {label} | {kind} | {eng} | {cpu} | {gen} | {fallback} |");
            eprintln!("{row}");
            rows.push(row);
        }
    }
    println!();
    println!(
        "Route time on `{spec}` ({threads} threads, median (min–max) of {rounds} runs; engine: ranking + base LIDs, LMC 0; \
         fabricd: ranking + route_all_checked, LMC 1 with the Up*/Down* escape LIDs and the validity check):"
    );
    println!();
    println!("| fabric | engine | engine ms | engine CPU ms | fabricd ms | fallback |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
