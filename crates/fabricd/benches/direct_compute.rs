//! Benchmark: the routing pool's first-generation computation (`fabricd::compute::compute`,
//! the daemon's `compute_ms`) on small direct topologies, per stage (issue 19: fabricd's
//! `compute_ms` against OpenSM's dfsssp, lash and nue on the same fabrics).
//!
//! For each fabric (generator notation, optionally with `--remove-links N` cables cut, seed
//! `--seed`), builds the input of a daemon's first generation (nothing installed, no LIDs
//! before, multicast on with no group, the default partitions) and runs `compute` `--runs`
//! times on a rayon pool of `--threads` threads (the daemon's routing pool has 2 by default),
//! reporting the median and minimum of `compute_ms`, the first run's (what a daemon's first
//! generation pays: cold caches and fresh allocations), the median of each stage, the process
//! CPU time (user + system) per run, the layers and a digest of the tables (to compare outputs
//! across commits).
//!
//! ```text
//! cargo bench -p fabricd --bench direct_compute -- [--spec 'SLIMFLY(5;4)' ...] [--remove-links N]
//!     [--seed S] [--runs N] [--lmc 0|1] [--engine dfsssp] [--threads T]
//! ```

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use anyhow::{bail, Context};
use fabric_routing::EngineKind;
use fabric_topology::gen::{generate_str, Degrade};
use fabricd::compute::{compute, ComputeInput, Computed, StageTimes};

struct Args {
    specs: Vec<String>,
    remove_links: usize,
    seed: u64,
    runs: usize,
    lmc: u8,
    engine: EngineKind,
    threads: usize,
}

fn parse() -> anyhow::Result<Args> {
    let mut a = Args {
        specs: vec![],
        remove_links: 0,
        seed: 1,
        runs: 50,
        lmc: 1,
        engine: "dfsssp".parse().map_err(|e| anyhow::anyhow!("{e}"))?,
        threads: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = || it.next().with_context(|| format!("{x} needs a value"));
        match x.as_str() {
            "--spec" => a.specs.push(val()?),
            "--remove-links" => a.remove_links = val()?.parse()?,
            "--seed" => a.seed = val()?.parse()?,
            "--runs" => a.runs = val()?.parse()?,
            "--lmc" => a.lmc = val()?.parse()?,
            "--engine" => a.engine = val()?.parse().map_err(|e| anyhow::anyhow!("{e}"))?,
            "--threads" => a.threads = val()?.parse()?,
            "--bench" => {}
            _ => bail!("unknown argument {x}"),
        }
    }
    if a.specs.is_empty() {
        a.specs = vec!["SLIMFLY(5;4)".into(), "HYPERX(8,8;4)".into()];
    }
    Ok(a)
}

fn input(fabric: Arc<fabric_topology::Fabric>, a: &Args) -> ComputeInput {
    ComputeInput {
        job: 1,
        lmc: a.lmc,
        engine: a.engine,
        ports_in_use: false,
        data_vl_capacity: Some(8),
        // The daemon's default `[routing] topology = "auto"`.
        detect_topology: true,
        ..ComputeInput::from_scratch(fabric, vec![])
    }
}

fn cpu_ms() -> f64 {
    // utime + stime of the process from /proc (no unsafe getrusage).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = 100.0; // USER_HZ
    let ut: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let st: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    (ut + st) * 1000.0 / tick
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn digest(c: &Computed) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for s in 0..c.lfts.num_switches() {
        for lid in 0..c.lfts.row_len() {
            c.lfts.get(fabric_topology::SwitchId(s as u32), lid as u32).hash(&mut h);
        }
    }
    if let Some(v) = &c.vl {
        v.layers.hash(&mut h);
        v.data_vls.hash(&mut h);
        v.path_sls.sl.hash(&mut h);
    }
    h.finish()
}

fn main() -> anyhow::Result<()> {
    let a = parse()?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(a.threads.max(1)).build()?;
    println!(
        "engine {} lmc {} threads {} runs {} remove_links {} seed {}",
        a.engine, a.lmc, a.threads, a.runs, a.remove_links, a.seed
    );
    for spec in &a.specs {
        let d = (a.remove_links > 0).then_some(Degrade {
            remove_links: a.remove_links,
            remove_switches: 0,
            seed: a.seed,
        });
        let fabric = Arc::new(generate_str(spec, d.as_ref())?);
        let inp = input(fabric, &a);
        let mut total = Vec::new();
        let mut st: Vec<StageTimes> = Vec::new();
        let mut dig = None;
        let mut layers = 0;
        let cpu0 = cpu_ms();
        for _ in 0..a.runs {
            let c = pool.install(|| compute(inp.clone()))?;
            total.push(c.compute_ms);
            st.push(c.stages);
            layers = c.vl.as_ref().map_or(0, |v| v.layers);
            let d = digest(&c);
            if let Some(x) = dig {
                assert_eq!(x, d, "non-deterministic result");
            }
            dig = Some(d);
        }
        let cpu = (cpu_ms() - cpu0) / a.runs as f64;
        let first = total.first().copied().unwrap_or(0.0);
        let min = total.iter().copied().fold(f64::INFINITY, f64::min);
        let med = median(&mut total);
        let m = |f: fn(&StageTimes) -> f64| {
            let mut v: Vec<f64> = st.iter().map(f).collect();
            median(&mut v)
        };
        println!(
            "{spec:16} compute_ms median {med:.3} min {min:.3} first {first:.3} cpu/run {cpu:.2} | topo {:.3} rank {:.3} lids {:.3} route {:.3} vl {:.3} select {:.3} mcast {:.3} part {:.3} | layers {layers} digest {:016x}",
            m(|s| s.topology),
            m(|s| s.ranking),
            m(|s| s.lids),
            m(|s| s.route),
            m(|s| s.vl),
            m(|s| s.select),
            m(|s| s.mcast),
            m(|s| s.partitions),
            dig.unwrap_or(0)
        );
    }
    Ok(())
}
