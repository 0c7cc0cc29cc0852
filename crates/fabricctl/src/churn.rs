//! `fabricctl churn`: LFT blocks a single cable fault rewrites (issue 16, "minimal churn").
//!
//! As fabricd does on a fault (`fabricd::compute`): the fabric with the cable's link down
//! ([`FabricEvent::LinkDown`]), ranked again, the LID plan of the intact fabric kept, routed with
//! [`route_all_checked`] (base LIDs by the engine, escape LIDs by Up*/Down* when LMC = 1, the
//! Up*/Down* repair of what the engine left unreachable); the churn is the number of 64-entry LFT
//! blocks that differ from the intact fabric's tables over all switches ([`Lfts::diff`]: what
//! fabricd's update writes). The faults are given (`--fault SWITCH[PORT]`) or drawn: `--faults N`
//! cables with a seeded generator, round-robin over the cable classes (leaf–level 1, level 1–level
//! 2, ...) and uniform within a class.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use fabric_ranking::rank;
use fabric_routing::{route_all_checked, EngineKind, Guid2Lid, Lfts, RoutingContext, BLOCK_SIZE};
use fabric_topology::{fmt_guid, FabricEvent, PortNum, SwitchId};
use serde_json::json;

use crate::offline::{load, plan_lids, Loaded};

#[derive(Args, Debug)]
pub struct ChurnArgs {
    /// Topology file (ibnetdiscover / ibsim format) of the intact fabric.
    file: PathBuf,
    /// Routing engine for the base LIDs (any name of `route --engine`).
    #[arg(long, default_value = "dmodc")]
    engine: String,
    /// OpenSM root_guid_file (one GUID per line): rank downward from these switches.
    #[arg(long)]
    roots: Option<PathBuf>,
    /// Random single-cable faults to measure, one at a time (ignored when --fault is given).
    #[arg(long, default_value_t = 20)]
    faults: usize,
    /// Seed of the random fault choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A cable to fail, by one of its switch ends: `GUID[PORT]`, `"DESC"[PORT]` or `NAME:PORT`
    /// (repeatable; each fault is measured alone against the intact fabric).
    #[arg(long = "fault", value_name = "SWITCH[PORT]")]
    fault: Vec<String>,
    /// Only list the faults that would be measured (switch GUIDs, ports, levels), do not route.
    #[arg(long)]
    list: bool,
    /// LIDs per end port: 1 (base + escape, LMC 1, fabricd's default) or 0 (base LIDs only).
    /// Default: LMC 1 if it fits.
    #[arg(long)]
    lmc: Option<u8>,
    /// Highest usable LID (InfiniBand unicast: 0xBFFF).
    #[arg(long, default_value = "0xBFFF", value_parser = crate::offline::parse_u32)]
    max_lid: u32,
    /// JSON output (for scripts) instead of text.
    #[arg(long)]
    json: bool,
}

/// The levels of a cable's two ends, lower first (`None`: unranked).
type Levels = (Option<u32>, Option<u32>);

/// One inter-switch cable, by its end on the lower-ranked switch.
#[derive(Clone, Copy, Debug)]
struct Cable {
    lo: (SwitchId, PortNum),
    hi: (SwitchId, PortNum),
    /// Levels of the two ends (lower first); `None` when unranked.
    levels: Levels,
}

/// splitmix64: the fault choice needs a few reproducible draws, nothing more.
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every live inter-switch cable once, oriented from its lower-ranked end.
fn cables(l: &Loaded) -> Vec<Cable> {
    let f = &l.fabric;
    let mut out = Vec::new();
    for a in f.switch_ids() {
        for (pn, _) in f.switch(a).external_ports() {
            let Some((b, rp)) = f.switch_link_live(a, pn) else {
                continue;
            };
            if (b.idx(), rp) <= (a.idx(), pn) {
                continue;
            }
            let (la, lb) = (l.ranking.level_of(a), l.ranking.level_of(b));
            let c = if la <= lb {
                Cable {
                    lo: (a, pn),
                    hi: (b, rp),
                    levels: (la, lb),
                }
            } else {
                Cable {
                    lo: (b, rp),
                    hi: (a, pn),
                    levels: (lb, la),
                }
            };
            out.push(c);
        }
    }
    out
}

/// `count` distinct cables: round-robin over the classes (by the levels of their ends), uniform
/// within a class.
fn draw(all: &[Cable], count: usize, seed: u64) -> Vec<Cable> {
    let mut classes: Vec<(Levels, Vec<Cable>)> = Vec::new();
    for c in all {
        match classes.iter_mut().find(|(k, _)| *k == c.levels) {
            Some((_, v)) => v.push(*c),
            None => classes.push((c.levels, vec![*c])),
        }
    }
    classes.sort_by_key(|(k, _)| *k);
    let mut rng = SplitMix(seed);
    let mut out = Vec::new();
    while out.len() < count && classes.iter().any(|(_, v)| !v.is_empty()) {
        for (_, v) in classes.iter_mut().filter(|(_, v)| !v.is_empty()) {
            if out.len() == count {
                break;
            }
            let i = rng.below(v.len());
            out.push(v.swap_remove(i));
        }
    }
    out
}

/// The cable named by `key` (`GUID[PORT]`, `"DESC"[PORT]` or `NAME:PORT`).
fn named(l: &Loaded, all: &[Cable], key: &str) -> Result<Cable> {
    let (sw, port) = if let Some(open) = key.rfind('[') {
        let port = key[open + 1..].strip_suffix(']').context("expected SWITCH[PORT]")?;
        (key[..open].trim_matches('"'), port)
    } else if let Some((s, p)) = key.rsplit_once(':') {
        (s, p)
    } else {
        bail!("fault {key:?}: expected SWITCH[PORT] or SWITCH:PORT");
    };
    let port: PortNum = port
        .parse()
        .with_context(|| format!("fault {key:?}: bad port {port:?}"))?;
    let id = l
        .fabric
        .find_switch(sw)
        .with_context(|| format!("fault {key:?}: no switch {sw:?} in the topology"))?;
    all.iter()
        .find(|c| c.lo == (id, port) || c.hi == (id, port))
        .copied()
        .with_context(|| format!("fault {key:?}: port {port} of that switch has no live inter-switch cable"))
}

/// What one fault changed.
struct Churn {
    blocks: usize,
    switches: usize,
    entries: usize,
    /// Blocks of the two end switches holding an entry on the dead port: they must change.
    forced_blocks: usize,
    /// Changed blocks by level of their switch (index = level; unranked switches last).
    by_level: Vec<usize>,
    /// Destination LIDs with a changed entry on some switch.
    lids: usize,
    /// Changed entries whose destination is a switch LID.
    switch_lid_entries: usize,
    /// The switches with the most changed blocks (switch, changed blocks, changed entries),
    /// most first, at most [`TOP`].
    top: Vec<(SwitchId, usize, usize)>,
    fallback: String,
}

/// How many of the most changed switches a fault reports.
const TOP: usize = 6;

/// The churn between the intact fabric's tables `old` and the tables `new` after the fault `c`;
/// `level` ranks the switches (of the intact fabric).
fn diff(old: &Lfts, new: &Lfts, c: &Cable, level: &[Option<u32>], switch_lids: &[bool], fallback: String) -> Churn {
    let height = level.iter().flatten().max().map_or(0, |&h| h as usize + 1);
    let mut r = Churn {
        blocks: 0,
        switches: 0,
        entries: 0,
        forced_blocks: 0,
        by_level: vec![0; height + 1],
        lids: 0,
        switch_lid_entries: 0,
        top: Vec::new(),
        fallback,
    };
    let mut lid_changed = vec![false; new.row_len()];
    for (s, lv) in level.iter().enumerate().take(new.num_switches()) {
        let sw = SwitchId(s as u32);
        let (o, n) = (old.row(sw), new.row(sw));
        let (mut sw_blocks, mut sw_entries) = (0, 0);
        for (b, (ob, nb)) in o.chunks(BLOCK_SIZE).zip(n.chunks(BLOCK_SIZE)).enumerate() {
            let mut d = 0;
            for (i, (x, y)) in ob.iter().zip(nb).enumerate() {
                if x != y {
                    d += 1;
                    lid_changed[b * BLOCK_SIZE + i] = true;
                }
            }
            if d > 0 {
                r.blocks += 1;
                r.entries += d;
                r.by_level[lv.map_or(height, |l| l as usize)] += 1;
                sw_blocks += 1;
                sw_entries += d;
            }
        }
        if sw_blocks > 0 {
            r.switches += 1;
            r.top.push((sw, sw_blocks, sw_entries));
        }
    }
    r.top
        .sort_by_key(|&(sw, b, e)| (std::cmp::Reverse(b), std::cmp::Reverse(e), sw));
    r.top.truncate(TOP);
    r.lids = lid_changed.iter().filter(|&&x| x).count();
    r.switch_lid_entries = (0..new.num_switches())
        .map(|s| {
            let (o, n) = (old.row(SwitchId(s as u32)), new.row(SwitchId(s as u32)));
            o.iter()
                .zip(n)
                .enumerate()
                .filter(|&(lid, (x, y))| x != y && switch_lids.get(lid).copied().unwrap_or(false))
                .count()
        })
        .sum();
    for (sw, port) in [c.lo, c.hi] {
        r.forced_blocks += old.row(sw).chunks(BLOCK_SIZE).filter(|b| b.contains(&port)).count();
    }
    r
}

fn cable_json(l: &Loaded, c: &Cable) -> serde_json::Value {
    let end = |(sw, port): (SwitchId, PortNum), level: Option<u32>| {
        let s = l.fabric.switch(sw);
        json!({"guid": fmt_guid(s.guid), "desc": s.desc, "port": port, "level": level})
    };
    json!({"lo": end(c.lo, c.levels.0), "hi": end(c.hi, c.levels.1)})
}

pub fn churn(a: ChurnArgs) -> Result<()> {
    let l = load(&a.file, a.roots.as_deref())?;
    let kind: EngineKind = a.engine.parse()?;
    let all = cables(&l);
    let faults = if a.fault.is_empty() {
        draw(&all, a.faults, a.seed)
    } else {
        a.fault.iter().map(|k| named(&l, &all, k)).collect::<Result<_>>()?
    };
    if a.list {
        let v: Vec<_> = faults.iter().map(|c| cable_json(&l, c)).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let lids = plan_lids(&l.fabric, &Guid2Lid::default(), a.lmc, a.max_lid)?;
    let ctx = RoutingContext {
        fabric: &l.fabric,
        ranking: &l.ranking,
        lids: &lids,
    };
    let (base, _) = route_all_checked(&ctx, kind, None)?;
    let mut switch_lids = vec![false; base.lfts.row_len()];
    for s in l.fabric.switch_ids() {
        if let Some(x) = switch_lids.get_mut(lids.switch_lid(s) as usize) {
            *x = true;
        }
    }
    let mut rows = Vec::new();
    for c in &faults {
        let guid = l.fabric.switch(c.lo.0).guid;
        let fabric = l.fabric.apply(&[FabricEvent::LinkDown {
            switch: guid,
            port: c.lo.1,
        }])?;
        let ranking = rank(&fabric, &l.options);
        let ctx = RoutingContext {
            fabric: &fabric,
            ranking: &ranking,
            lids: &lids,
        };
        let (routed, rc) = route_all_checked(&ctx, kind, None)?;
        rows.push(diff(
            &base.lfts,
            &routed.lfts,
            c,
            &l.ranking.level,
            &switch_lids,
            rc.fallback.name().to_string(),
        ));
    }
    let total_blocks = base.lfts.num_blocks() * l.fabric.num_switches();
    let n = rows.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Churn) -> usize| rows.iter().map(f).sum::<usize>() as f64 / n;
    let max = |f: &dyn Fn(&Churn) -> usize| rows.iter().map(f).max().unwrap_or(0);
    if a.json {
        let v = json!({
            "file": a.file.display().to_string(),
            "engine": a.engine,
            "lmc": lids.lmc,
            "switches": l.fabric.num_switches(),
            "blocks_per_switch": base.lfts.num_blocks(),
            "total_blocks": total_blocks,
            "faults": faults.iter().zip(&rows).map(|(c, r)| json!({
                "cable": cable_json(&l, c),
                "blocks": r.blocks,
                "switches": r.switches,
                "entries": r.entries,
                "forced_blocks": r.forced_blocks,
                "blocks_by_level": r.by_level,
                "lids": r.lids,
                "switch_lid_entries": r.switch_lid_entries,
                "top_switches": r.top.iter().map(|&(sw, b, e)| json!({
                    "guid": fmt_guid(l.fabric.switch(sw).guid),
                    "desc": l.fabric.switch(sw).desc,
                    "level": l.ranking.level_of(sw),
                    "blocks": b,
                    "entries": e,
                })).collect::<Vec<_>>(),
                "fallback": r.fallback,
            })).collect::<Vec<_>>(),
            "blocks_mean": mean(&|r| r.blocks),
            "blocks_max": max(&|r| r.blocks),
            "switches_mean": mean(&|r| r.switches),
            "entries_mean": mean(&|r| r.entries),
            "forced_blocks_mean": mean(&|r| r.forced_blocks),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("file     {}", a.file.display());
        println!("engine   {} (LMC {})", a.engine, lids.lmc);
        println!(
            "tables   {} switches x {} blocks = {total_blocks} blocks",
            l.fabric.num_switches(),
            base.lfts.num_blocks()
        );
        for (c, r) in faults.iter().zip(&rows) {
            let s = |(sw, p): (SwitchId, PortNum)| format!("{}[{p}]", fmt_guid(l.fabric.switch(sw).guid));
            println!(
                "fault    {} (level {}) - {} (level {}): {} blocks on {} switches (by level {:?}), {} entries of {} LIDs ({} forced blocks){}",
                s(c.lo),
                c.levels.0.map_or("?".into(), |v| v.to_string()),
                s(c.hi),
                c.levels.1.map_or("?".into(), |v| v.to_string()),
                r.blocks,
                r.switches,
                r.by_level,
                r.entries,
                r.lids,
                r.forced_blocks,
                if r.fallback == "none" { String::new() } else { format!(", fallback {}", r.fallback) }
            );
            let top: Vec<String> = r
                .top
                .iter()
                .map(|&(sw, b, e)| format!("'{}' {b} blocks/{e} entries", l.fabric.switch(sw).desc))
                .collect();
            println!(
                "         most changed: {}; {} entries to switch LIDs",
                top.join(", "),
                r.switch_lid_entries
            );
        }
        println!(
            "blocks   mean {:.1} max {} (switches mean {:.1}, entries mean {:.1}, forced blocks mean {:.1})",
            mean(&|r| r.blocks),
            max(&|r| r.blocks),
            mean(&|r| r.switches),
            mean(&|r| r.entries),
            mean(&|r| r.forced_blocks)
        );
    }
    Ok(())
}
