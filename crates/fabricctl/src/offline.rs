//! Offline subcommands: `topo gen`, `topo info`, `route`, `analyze`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use fabric_metrics::{MetricsOptions, RpStats};
use fabric_ranking::{rank, RankOptions, Ranking};
use fabric_routing::{
    assign_lids, check, route_all_checked, EngineKind, Guid2Lid, Lfts, LidPlan, NodeGroups, RoutedFabric, RoutingCheck,
    RoutingContext,
};
use fabric_topology::{fmt_guid, gen, ibnet, Fabric};
use rayon::prelude::*;
use serde_json::json;

use crate::human::{num, pct};

mod guid2lid;
mod layers;

pub(crate) use guid2lid::plan_from_guid2lid;
use guid2lid::read_guid2lid;

#[derive(Args, Debug)]
pub struct TopoArgs {
    #[command(subcommand)]
    cmd: Option<TopoCmd>,
    /// JSON output (live topology of the daemon).
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum TopoCmd {
    /// Generate a fat-tree topology file: PGFT(h;m..;w..;p..), XGFT(h;m..;w..), KARY(k,n), QFT(h;m..;w..;p..).
    Gen {
        /// The fat-tree, e.g. `PGFT(3;4,4,6;1,4,4;1,1,1)`, `KARY(4,3)`.
        spec: String,
        /// Output file (default: standard output).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Remove N random inter-switch cables.
        #[arg(long, default_value_t = 0)]
        remove_links: usize,
        /// Remove N random non-leaf switches.
        #[arg(long, default_value_t = 0)]
        remove_switches: usize,
        /// Seed of the random removals.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Parse and rank a topology file; print counts, levels and diagnostics.
    Info {
        /// Topology file (ibnetdiscover / ibsim format).
        file: PathBuf,
        /// OpenSM root_guid_file (one GUID per line): rank downward from these switches.
        #[arg(long)]
        roots: Option<PathBuf>,
        /// JSON output (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct RouteArgs {
    /// Topology file (ibnetdiscover / ibsim format).
    file: PathBuf,
    /// Routing engine for the base LIDs: dmodc, dmodk, updown, updown-random.
    #[arg(long, default_value = "dmodc")]
    engine: String,
    /// OpenSM root_guid_file (one GUID per line): rank downward from these switches.
    #[arg(long)]
    roots: Option<PathBuf>,
    /// Write the LFTs in OpenSM `opensm-lfts.dump` format to this path ("-" = stdout).
    #[arg(long)]
    lft_out: Option<PathBuf>,
    /// Write the LID assignment in OpenSM `guid2lid` format to this path.
    #[arg(long)]
    guid2lid_out: Option<PathBuf>,
    /// Keep LIDs from this OpenSM `guid2lid` file.
    #[arg(long)]
    guid2lid: Option<PathBuf>,
    /// `2^LMC` LIDs per end port (0..=7): 0 = one LID, 1 = base + escape, ≥ 2 = `2^LMC − 1`
    /// layer LIDs + the escape as the last offset (`layered:K` needs `2^LMC − 1 ≥ K`). Default:
    /// `layered:K`'s smallest, else LMC 1 if it fits.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    lmc: Option<u8>,
    /// Highest usable LID (InfiniBand unicast: 0xBFFF).
    #[arg(long, default_value = "0xBFFF", value_parser = parse_u32)]
    max_lid: u32,
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Topology file (ibnetdiscover / ibsim format).
    file: PathBuf,
    /// Routing engine for the base LIDs: dmodc, dmodk, updown, updown-random (ignored with
    /// --lfts).
    #[arg(long, default_value = "dmodc")]
    engine: String,
    /// OpenSM root_guid_file (one GUID per line): rank downward from these switches.
    #[arg(long)]
    roots: Option<PathBuf>,
    /// Number of random permutations for mu_rp (at most 100000, as `metrics.random_perms` of
    /// the daemon).
    #[arg(long, default_value_t = 40, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_RANDOM_PERMS))]
    rp: usize,
    /// Seed of the random permutations (same seed, same permutations).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the all-to-all metrics (mu_a2a, xi), which are quadratic in the node count.
    #[arg(long)]
    no_a2a: bool,
    /// `2^LMC` LIDs per end port (0..=7): 0 = one LID, 1 = base + escape, ≥ 2 = `2^LMC − 1`
    /// layer LIDs + the escape as the last offset (`layered:K` needs `2^LMC − 1 ≥ K`). Default:
    /// `layered:K`'s smallest, else LMC 1 if it fits.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    lmc: Option<u8>,
    /// Highest usable LID (InfiniBand unicast: 0xBFFF).
    #[arg(long, default_value = "0xBFFF", value_parser = parse_u32)]
    max_lid: u32,
    /// Analyse these LFTs instead of routing FILE: an OpenSM `opensm-lfts.dump`, or `ibroute`
    /// outputs concatenated (tables read back from a fabric programmed by any subnet manager).
    /// Needs --guid2lid with the LIDs those tables were computed for.
    #[arg(long, requires = "guid2lid")]
    lfts: Option<PathBuf>,
    /// OpenSM `guid2lid` file. With --lfts: the LIDs in force on the fabric (every switch and end
    /// port of FILE must have a record; LMC from the end ports' ranges). Without: LIDs to keep
    /// when routing, as in `route`.
    #[arg(long)]
    guid2lid: Option<PathBuf>,
    /// Jobs file (one job per line, `NAME: PORT PORT ...`, a port being a port GUID, a node GUID
    /// or an end-port description, `"..."` when it has spaces; `#` comments): prints each job's
    /// own metrics (mu of its
    /// job-local shift permutations, effective edge-forwarding index of its all-to-all, dark
    /// share).
    #[arg(long)]
    jobs: Option<PathBuf>,
    /// Route the base LIDs job-aware: Dmodc/Dmodk on NIDs re-indexed by job (thesis Alg. 4;
    /// jobs in file order, end ports in no job last), as `fabricd` does with
    /// `[routing] job_aware`.
    #[arg(long, requires = "jobs", conflicts_with = "lfts")]
    job_aware: bool,
    /// Data VLs for the virtual layers of `dfsssp` and `layered:K` (one kept for escape LIDs).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=15))]
    max_vls: u8,
    /// JSON output (for scripts) instead of text.
    #[arg(long)]
    json: bool,
}

/// One job of a jobs file.
struct JobSpec {
    name: String,
    end_ports: Vec<fabric_topology::EndPortId>,
}

/// The ports of a jobs-file line: separated by whitespace, `"..."` for a description with
/// spaces.
fn job_tokens(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut t = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(x) => t.push(x),
                    None => return Err(format!("unterminated quote in {text:?}")),
                }
            }
            out.push(t);
        } else {
            let mut t = String::new();
            while let Some(&x) = chars.peek() {
                if x.is_whitespace() {
                    break;
                }
                t.push(x);
                chars.next();
            }
            out.push(t);
        }
    }
    Ok(out)
}

/// Reads a jobs file: `NAME: PORT PORT ...` per line (blank lines and `#` comments skipped);
/// every error names the file, the line and the offending text.
fn read_jobs(path: &Path, fabric: &Fabric) -> Result<Vec<JobSpec>> {
    let text = read_small(path)?;
    let mut jobs: Vec<JobSpec> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let Some((name, ports)) = line.split_once(':') else {
            bail!("{}: expected `NAME: PORT PORT ...`, found {line:?}", at());
        };
        let name = name.trim();
        if name.is_empty() {
            bail!("{}: a job needs a name before the colon", at());
        }
        if jobs.iter().any(|j| j.name == name) {
            bail!("{}: job {name:?} is listed twice", at());
        }
        let mut end_ports = Vec::new();
        for key in job_tokens(ports).map_err(|e| anyhow::anyhow!("{}: job {name:?}: {e}", at()))? {
            match fabric.find_end_port(&key) {
                Some(ep) => end_ports.push(ep),
                None => bail!("{}: job {name:?}: no end port {key:?} in the topology", at()),
            }
        }
        if end_ports.is_empty() {
            bail!("{}: job {name:?} lists no end port", at());
        }
        jobs.push(JobSpec {
            name: name.to_string(),
            end_ports,
        });
    }
    Ok(jobs)
}

/// Most random permutations `analyze --rp` computes (as the daemon's `metrics.random_perms`).
const MAX_RANDOM_PERMS: u64 = 100_000;

/// Reads a text file for a command: a regular file of at most `limit` bytes (`/dev/zero` or a
/// 100 GB file is refused, not read), invalid UTF-8 named by its line.
fn read_text(path: &Path, limit: u64) -> Result<String> {
    Ok(fabric_topology::textfile::read_text_file(path, limit)?)
}

/// A small input file: jobs, root GUIDs, `guid2lid`.
fn read_small(path: &Path) -> Result<String> {
    read_text(path, fabric_topology::textfile::SMALL_TEXT_LIMIT)
}

pub(crate) fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("invalid number {s:?}: {e}"))
}

pub fn topo(a: TopoArgs, target: &crate::remote::Target) -> Result<()> {
    match a.cmd {
        Some(TopoCmd::Gen {
            spec,
            output,
            remove_links,
            remove_switches,
            seed,
        }) => {
            let degrade = gen::Degrade {
                remove_links,
                remove_switches,
                seed,
            };
            let d = (remove_links > 0 || remove_switches > 0).then_some(&degrade);
            let fabric = gen::generate_str(&spec, d)?;
            let text = ibnet::write(&fabric);
            match output {
                Some(p) => write_atomic(&p, text.as_bytes())?,
                None => crate::remote::write_stdout(format_args!("{text}")),
            }
            Ok(())
        }
        Some(TopoCmd::Info { file, roots, json }) => topo_info(&file, roots.as_deref(), json),
        None => crate::remote::topo(target, a.json),
    }
}

/// Replaces `path` with `bytes` atomically (the workspace's `atomic-write-file`: temporary in
/// the same directory, fsync, rename, fsync of the directory; the old file's mode is kept).
/// A path that names something other than a regular file (`/dev/null`, `/dev/stdout`, a FIFO)
/// is written in place: renaming over it would replace the device or pipe by a regular file
/// (as root, `--lft-out /dev/null` replaced the machine's `/dev/null`).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Like [`write_atomic`], the content streamed by `fill` (the temporary is only renamed into
/// place once `fill` succeeded).
fn write_atomic_with(path: &Path, fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        let mut f = std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?,
        );
        return fill(&mut f)
            .and_then(|()| std::io::Write::flush(&mut f))
            .with_context(|| format!("writing {}", path.display()));
    }
    let mut f = atomic_write_file::AtomicWriteFile::open(path)
        .with_context(|| format!("creating a temporary beside {}", path.display()))?;
    fill(&mut f)
        .and_then(|()| f.commit())
        .with_context(|| format!("writing {}", path.display()))
}

pub(crate) struct Loaded {
    pub(crate) fabric: Fabric,
    warnings: Vec<String>,
    pub(crate) ranking: Ranking,
    /// The ranking options (root GUIDs), to rank a changed fabric the same way.
    pub(crate) options: RankOptions,
}

pub(crate) fn load(file: &Path, roots: Option<&Path>) -> Result<Loaded> {
    let parsed = crate::progress::spinner(&format!("reading {}", file.display()), || ibnet::read_file(file))?;
    let mut opts = RankOptions::default();
    if let Some(r) = roots {
        let text = read_small(r)?;
        opts.roots = fabric_ranking::parse_root_guid_file(&text, &r.display().to_string())?;
    }
    let ranking = rank(&parsed.fabric, &opts);
    Ok(Loaded {
        fabric: parsed.fabric,
        warnings: parsed.warnings,
        ranking,
        options: opts,
    })
}

fn topo_info(file: &Path, roots: Option<&Path>, json: bool) -> Result<()> {
    let l = load(file, roots)?;
    let f = &l.fabric;
    let (links, links_live) = f.count_links();
    let leaves = f.switch_ids().filter(|&s| f.is_leaf(s)).count();
    let mut levels = vec![0usize; l.ranking.height as usize];
    for lv in l.ranking.level.iter().flatten() {
        levels[*lv as usize] += 1;
    }
    let diagnostics: Vec<String> = l
        .warnings
        .iter()
        .cloned()
        .chain(l.ranking.diagnostics.iter().map(std::string::ToString::to_string))
        .collect();
    if json {
        let v = json!({
            "file": file.display().to_string(),
            "switches": f.num_switches(),
            "nodes": f.num_end_ports(),
            "links": links,
            "links_up": links_live,
            "leaves": leaves,
            "levels": levels,
            "diagnostics": diagnostics,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("file         {}", file.display());
        println!("switches     {}", f.num_switches());
        println!("nodes        {}", f.num_end_ports());
        println!("links        {links} ({links_live} up)");
        println!("leaves       {leaves}");
        println!(
            "levels       {}",
            levels
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        println!("diagnostics  {}", diagnostics.len());
        for d in &diagnostics {
            println!("  {d}");
        }
    }
    Ok(())
}

pub(crate) fn plan_lids(f: &Fabric, previous: &Guid2Lid, lmc: Option<u8>, max_lid: u32) -> Result<LidPlan> {
    match lmc {
        Some(l) => Ok(assign_lids(f, previous, l, max_lid)?),
        None => match assign_lids(f, previous, 1, max_lid) {
            Ok(p) => Ok(p),
            Err(e) => {
                eprintln!("fabricctl: {e}; using one LID per end port (LMC 0)");
                Ok(assign_lids(f, previous, 0, max_lid)?)
            }
        },
    }
}

/// Assigns LIDs and routes a loaded file as the daemon does (checked, destinations the engine
/// left unreachable re-routed by Up*/Down*: [`route_all_checked`]); returns the plan, the
/// tables, the routing time (ms, check and fallback included) and the check. A fallback or a
/// still invalid routing is reported on stderr.
fn route_loaded(
    l: &Loaded,
    kind: EngineKind,
    previous: &Guid2Lid,
    lmc: Option<u8>,
    max_lid: u32,
    groups: Option<&NodeGroups>,
) -> Result<(LidPlan, RoutedFabric, f64, RoutingCheck)> {
    let lids = plan_lids(&l.fabric, previous, lmc, max_lid)?;
    let ctx = RoutingContext {
        fabric: &l.fabric,
        ranking: &l.ranking,
        lids: &lids,
    };
    let t = Instant::now();
    let (routed, rc) = crate::progress::spinner("routing", || route_all_checked(&ctx, kind, groups))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !rc.reason.is_empty() {
        eprintln!("fabricctl: warning: routing validity: {}", rc.reason);
    }
    Ok((lids, routed, ms, rc))
}

pub fn route(a: RouteArgs) -> Result<()> {
    let l = load(&a.file, a.roots.as_deref())?;
    let kind: EngineKind = a.engine.parse()?;
    let previous = match &a.guid2lid {
        Some(p) => read_guid2lid(p, a.max_lid)?,
        None => Guid2Lid::default(),
    };
    let lmc = match a.lmc {
        Some(x) => Some(x),
        None => layers::default_lmc(kind)?,
    };
    let (lids, routed, ms, _) = route_loaded(&l, kind, &previous, lmc, a.max_lid, None)?;
    layers::route_note(kind, &l, &lids, &routed.lfts);
    eprintln!(
        "routed {} switches, {} end ports with {} in {} ms (base {} ms, escape {} ms)",
        l.fabric.num_switches(),
        l.fabric.num_end_ports(),
        a.engine,
        num(ms),
        num(routed.base_ms),
        num(routed.escape_ms)
    );
    if let Some(p) = &a.guid2lid_out {
        write_atomic(p, Guid2Lid::from_plan(&l.fabric, &lids).to_text().as_bytes())?;
    }
    if let Some(p) = &a.lft_out {
        // Streamed: the dump is ~76 bytes per (switch, LID), far more than the tables.
        let dump = fabric_routing::OpensmLftWriter::new(&l.fabric, &lids, &routed.lfts);
        if p.as_os_str() == "-" {
            crate::remote::write_stdout_with(|out| dump.write_all(out));
        } else {
            write_atomic_with(p, |f| dump.write_all(f))?;
        }
    }
    Ok(())
}

/// LIDs and LFTs of `analyze`: read back (`--lfts` + `--guid2lid`) or routed; with the routing
/// time in ms when routed.
fn analyze_tables(
    a: &AnalyzeArgs,
    l: &Loaded,
    jobs: &[JobSpec],
) -> Result<(LidPlan, Lfts, Option<f64>, Option<RoutingCheck>)> {
    match &a.lfts {
        Some(p) => {
            let g = a
                .guid2lid
                .as_deref()
                .context("--lfts needs --guid2lid (the LIDs of the tables)")?;
            let lids = plan_from_guid2lid(
                &l.fabric,
                &read_guid2lid(g, a.max_lid)?,
                &g.display().to_string(),
                a.max_lid,
            )?;
            // Read line by line: a dump is ~76 bytes per (switch, LID), ~10x its parsed form.
            let file = std::fs::File::open(p).with_context(|| format!("reading {}", p.display()))?;
            fabric_topology::textfile::regular_file_metadata(&file, p)?;
            let dump = fabric_routing::read_opensm_lfts(
                std::io::BufReader::with_capacity(1 << 20, file),
                &p.display().to_string(),
            )?;
            let lfts = dump.to_lfts(&l.fabric, a.max_lid)?;
            // A header's switch LID (when it names one) must be the recorded one: tables read
            // back under other LIDs would be analysed against the wrong destinations.
            for s in dump.switches.iter().filter(|s| s.lid != 0) {
                if let Some(id) = l.fabric.switch_by_guid(s.guid) {
                    let want = lids.switch_lid(id);
                    if want != s.lid {
                        bail!(
                            "{}:{}: switch {} has LID {} in the dump but {} in {}",
                            p.display(),
                            s.line,
                            fmt_guid(s.guid),
                            s.lid,
                            want,
                            g.display()
                        );
                    }
                }
            }
            Ok((lids, lfts, None, None))
        }
        None => {
            let kind: EngineKind = a.engine.parse()?;
            let previous = match &a.guid2lid {
                Some(g) => read_guid2lid(g, a.max_lid)?,
                None => Guid2Lid::default(),
            };
            let groups = a.job_aware.then(|| {
                let sets: Vec<&[fabric_topology::EndPortId]> = jobs.iter().map(|j| j.end_ports.as_slice()).collect();
                NodeGroups::from_sets(l.fabric.num_end_ports(), &sets)
            });
            let (lids, routed, ms, rc) = route_loaded(l, kind, &previous, a.lmc, a.max_lid, groups.as_ref())?;
            Ok((lids, routed.lfts, Some(ms), Some(rc)))
        }
    }
}

/// The switch port carrying the most paths of the worst shift, for operators to look at.
struct WorstPort {
    port: fabric_metrics::SwitchPort,
    /// Level of the switch (leaves at 0), when ranked.
    level: Option<u32>,
    /// `up` (towards a higher level), `down`, or `across` (same level or unranked).
    direction: &'static str,
}

fn worst_shift_port(l: &Loaded, lids: &LidPlan, lfts: &Lfts, shift: u32) -> Option<WorstPort> {
    if shift == 0 {
        return None;
    }
    let live: Vec<_> = l.fabric.end_port_ids().filter(|&e| l.fabric.end_port_live(e)).collect();
    let n = live.len();
    let pairs: Vec<_> = (0..n).map(|s| (live[s], live[(s + shift as usize) % n])).collect();
    let port = fabric_metrics::mu_of_pairs(&l.fabric, lids, lfts, &pairs)
        .ok()?
        .worst_port?;
    let level = l.ranking.level_of(port.switch);
    let remote = l
        .fabric
        .switch_link_live(port.switch, port.port)
        .map(|(r, _)| l.ranking.level_of(r));
    let direction = match (level, remote.flatten()) {
        (Some(a), Some(b)) if b > a => "up",
        (Some(a), Some(b)) if b < a => "down",
        _ => "across",
    };
    Some(WorstPort { port, level, direction })
}

pub fn analyze(a: AnalyzeArgs) -> Result<()> {
    if let Ok(kind @ EngineKind::Layered { .. }) = a.engine.parse::<EngineKind>() {
        return layers::analyze_layered(&a, kind);
    }
    let l = load(&a.file, a.roots.as_deref())?;
    let jobs = match &a.jobs {
        Some(p) => read_jobs(p, &l.fabric)?,
        None => Vec::new(),
    };
    let (lids, lfts, route_ms, routing_check) = analyze_tables(&a, &l, &jobs)?;
    // Each job on its own (its shifts, its all-to-all), in parallel over jobs.
    let job_rows = crate::progress::spinner("job metrics", || {
        jobs.par_iter()
            .map(|j| {
                let shift = fabric_metrics::job_shift_metrics(&l.fabric, &lids, &lfts, &j.end_ports)?;
                let a2a = fabric_metrics::job_metrics(&l.fabric, &lids, &lfts, &j.end_ports)?;
                Ok((shift, a2a))
            })
            .collect::<Result<Vec<_>, fabric_metrics::MetricsError>>()
    })?;
    let (validity, deadlock_free) = crate::progress::spinner("checking validity and deadlock freedom", || {
        (
            check::validity(&l.fabric, &lids, &lfts),
            check::deadlock_free(&l.fabric, &l.ranking, &lids, &lfts),
        )
    });
    // DFSSSP is deadlock-free over its virtual layers, not on one VL.
    let vl_layers = layers::dfsssp_layers(&a, &l, &lids, &lfts)?;
    let deadlock_free = vl_layers
        .as_ref()
        .map_or(deadlock_free, layers::LayersReport::deadlock_free);
    let opts = MetricsOptions {
        random_perms: a.rp,
        seed: a.seed,
        all_to_all: !a.no_a2a,
        shifts: true,
    };
    let m = crate::progress::bar("metrics (paths, shifts, random permutations)", |p| {
        fabric_metrics::compute_with_progress(&l.fabric, &lids, &lfts, &opts, p)
    });
    let worst = worst_shift_port(&l, &lids, &lfts, m.worst_shift);
    let floor = fabric_metrics::rp_floor(&l.fabric, &l.ranking.level);
    // P(mu >= k) around the floor's median: estimated best possible, and measured.
    let ks: Vec<u32> = (floor.median.saturating_sub(1).max(1)..=floor.median + 2).collect();
    let shares = |f: &dyn Fn(u32) -> f64| -> serde_json::Map<String, serde_json::Value> {
        ks.iter()
            .map(|&k| (k.to_string(), json!((f(k) * 1e4).round() / 1e4)))
            .collect()
    };
    let rp = |r: &RpStats| {
        let mut v = json!({"median": r.median, "q1": r.q1, "q39": r.q39});
        if r.samples > 0 {
            v["p_at_least"] = serde_json::Value::Object(shares(&|k| r.share_at_least(k)));
        }
        v
    };
    let floor_json = json!({
        "median": floor.median,
        "p_at_least": serde_json::Value::Object(shares(&|k| floor.p_at_least(k))),
    });
    if a.json {
        let v = json!({
            "file": a.file.display().to_string(),
            "engine": if a.lfts.is_some() { None } else { Some(&a.engine) },
            "lfts": a.lfts.as_ref().map(|p| p.display().to_string()),
            "switches": l.fabric.num_switches(),
            "nodes": l.fabric.num_end_ports(),
            "lmc": lids.lmc,
            "valid": validity.valid,
            "unreachable_pairs": validity.unreachable_count,
            "deadlock_free": deadlock_free,
            "vl_layers": vl_layers.as_ref().map(layers::LayersReport::json),
            "disconnected_pairs": validity.disconnected_pairs,
            "routing_fallback": routing_check.as_ref().map(|c| json!({
                "fallback": c.fallback.name(),
                "fallback_destinations": c.fallback_destinations,
                "engine_failed_destinations": c.engine_failed_destinations,
                "engine_unreachable_pairs": c.engine_unreachable_pairs,
                "reason": c.reason,
            })),
            "mu_sp": m.mu_sp,
            "mu_sp_worst": worst.as_ref().map(|w| json!({
                "shift": m.worst_shift,
                "switch": fmt_guid(w.port.guid),
                "port": w.port.port,
                "level": w.level,
                "direction": w.direction,
            })),
            "mu_rp": rp(&m.mu_rp),
            "mu_rp_floor": floor_json,
            "mu_a2a": m.mu_a2a,
            "xi": m.xi,
            "nu": m.nu,
            "unrouted_pairs": m.unrouted_pairs,
            "top_lid": lids.top(),
            "route_ms": route_ms,
            "job_aware": a.job_aware,
            "jobs": jobs.iter().zip(&job_rows).map(|(j, (sh, a2a))| json!({
                "name": j.name,
                "end_ports": sh.end_ports,
                "mu_sp": sh.mu_sp,
                "worst_shift": sh.worst_shift,
                "effective_xi": a2a.effective_xi,
                "dark_share": a2a.dark_share,
                "unrouted_pairs": sh.unrouted_pairs + a2a.unrouted_pairs,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("file               {}", a.file.display());
        match &a.lfts {
            Some(p) => println!("lfts               {}", p.display()),
            None => println!("engine             {}", a.engine),
        }
        println!("lmc                {}", lids.lmc);
        println!("valid              {}", validity.valid);
        println!("unreachable_pairs  {}", validity.unreachable_count);
        println!("deadlock_free      {deadlock_free}");
        vl_layers.iter().for_each(layers::LayersReport::print);
        if validity.disconnected_pairs > 0 {
            println!("disconnected_pairs {}", validity.disconnected_pairs);
        }
        if let Some(c) = routing_check.as_ref().filter(|c| !c.reason.is_empty()) {
            println!(
                "routing_fallback   {} ({} destinations): {}",
                c.fallback.name(),
                c.fallback_destinations,
                c.reason
            );
        }
        match &worst {
            Some(w) => println!(
                "mu_sp              {} (shift {}, at {}[{}], level {} {})",
                m.mu_sp,
                m.worst_shift,
                fmt_guid(w.port.guid),
                w.port.port,
                w.level.map_or("?".to_string(), |l| l.to_string()),
                w.direction
            ),
            None => println!("mu_sp              {}", m.mu_sp),
        }
        println!(
            "mu_rp              median {} q1 {} q39 {} (r = {})",
            num(m.mu_rp.median),
            num(m.mu_rp.q1),
            num(m.mu_rp.q39),
            a.rp
        );
        let p_mu = |f: &dyn Fn(u32) -> f64| {
            ks.iter()
                .map(|&k| format!(">={k} {}", pct(f(k))))
                .collect::<Vec<_>>()
                .join("  ")
        };
        if m.mu_rp.samples > 0 {
            println!("mu_rp P(mu)        {}", p_mu(&|k| m.mu_rp.share_at_least(k)));
        }
        println!(
            "mu_rp_floor        median {}  P(mu) {} (estimated best any destination-based routing can do)",
            floor.median,
            p_mu(&|k| floor.p_at_least(k))
        );
        println!("mu_a2a             {}", m.mu_a2a);
        println!("xi                 {}", m.xi);
        println!("nu                 {}", num(m.nu));
        if let Some(ms) = route_ms {
            println!("route_ms           {}", num(ms));
        }
        if !jobs.is_empty() {
            println!("job_aware          {}", a.job_aware);
            println!("jobs               name: end ports, job-local mu_sp (worst shift), effective xi, dark share");
            for (j, (sh, a2a)) in jobs.iter().zip(&job_rows) {
                println!(
                    "  {}: {} end ports, mu_sp {} (shift {}), effective_xi {}, dark {}{}",
                    j.name,
                    sh.end_ports,
                    sh.mu_sp,
                    sh.worst_shift,
                    a2a.effective_xi,
                    pct(a2a.dark_share),
                    match sh.unrouted_pairs + a2a.unrouted_pairs {
                        0 => String::new(),
                        u => format!(", {u} unrouted pairs"),
                    }
                );
            }
        }
    }
    Ok(())
}
