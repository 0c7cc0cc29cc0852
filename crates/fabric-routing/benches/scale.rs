//! Routing at scale (issue #17, Deliver 3): the full routing a generation computes —
//! ranking, LID plan, Dmodc base LIDs and switch LIDs, Up*/Down* escape LIDs, LFTs and the
//! validity check / fallback ([`route_all_checked`]) — on
//!
//! * `PGFT(3;24,12,30;1,12,12;1,2,1)`: 8 640 nodes, LMC 1 (the baseline of the ratios),
//! * `PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)`: 34 992 nodes, LMC 0 (InfiniBand, LIDs ≤ 0xBFFF)
//!   and LMC 1 with 24-bit addresses (`--max-lid 0xFFFFFF`, what the oob driver runs),
//! * `PGFT(3;32,32,64;1,32,32;1,1,1)`: 65 536 nodes, 5 120 switches of 64 ports, LMC 1 with
//!   24-bit addresses,
//!
//! each on rayon pools of 1 and 2 threads built here. One run prints, per fabric and thread
//! count, the best and median of a few full routings, the time of each stage (best of the
//! runs), the LFT bytes and the peak memory growth during one full routing: the peak resident
//! memory (`VmHWM`, reset through `/proc/self/clear_refs` just before) minus the resident
//! memory before (so the fabric itself is not counted). (A counting global allocator would
//! need `unsafe`, which the workspace forbids.)
//! The machine load (`/proc/loadavg`) is printed before and after, as the machine is shared.
//!
//! Not criterion: a full routing of the largest fabric takes about a second and the figures of
//! interest are the stage split and the memory, which criterion does not report.
//!
//! `cargo bench -p fabric-routing --bench scale` (optional argument: a substring of the fabric
//! names to run only those, e.g. `-- 65536`).

mod support;

use std::time::Instant;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::{
    assign_lids, check_and_repair, route_all, route_all_checked, route_all_reusing, EngineKind, Fallback, Guid2Lid,
    Lfts, RoutingContext, IB_MAX_UNICAST_LID,
};
use fabric_topology::Fabric;
use support::{fabric, pool, PGFT_34992, PGFT_8640};

/// The 3-level PGFT of 64-port switches, 65 536 nodes (5 120 switches).
const PGFT_65536: &str = "PGFT(3;32,32,64;1,32,32;1,1,1)";
/// 24-bit addresses (the oob driver).
const MAX_LID_24: u32 = 0xFF_FFFF;

fn status_kb(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time of the whole process so far (nanoseconds, every thread: the sum of the first
/// field of `/proc/self/task/*/schedstat`); 0 without /proc. Less sensitive than wall time to
/// the other users of a shared machine.
fn cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()))
        .sum()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// One case: a fabric, its LMC and highest LID.
struct Case {
    name: &'static str,
    spec: &'static str,
    lmc: u8,
    max_lid: u32,
}

/// Stage times of one full routing (milliseconds). `route` = [`route_all`] (table allocation,
/// base and escape LIDs); its wall time splits into `base` (Dmodc's preparation, the
/// allocation and the fill, with the escape entries when they are shared) and `escape` (the
/// escape's preparation, and its own fill when not shared), as `route_all` reports them.
#[derive(Clone, Copy, Default)]
struct Stages {
    rank: f64,
    lids: f64,
    route: f64,
    base: f64,
    escape: f64,
    check: f64,
    total: f64,
}

/// Wall and CPU time since a mark.
#[derive(Clone, Copy)]
struct Mark(Instant, u64);

impl Mark {
    fn now() -> Self {
        Mark(Instant::now(), cpu_ns())
    }
    /// (wall ms, CPU ms) since the mark.
    fn since(self) -> (f64, f64) {
        (
            self.0.elapsed().as_secs_f64() * 1e3,
            cpu_ns().saturating_sub(self.1) as f64 / 1e6,
        )
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The stages of [`route_all_checked`] one by one (the same calls it makes), each timed:
/// (wall, CPU) milliseconds.
fn staged(f: &Fabric, c: &Case) -> (Stages, Stages) {
    let mut cpu = Stages::default();
    let t0 = Mark::now();
    let t = Mark::now();
    let ranking = rank(f, &RankOptions::default());
    let rank_ms;
    (rank_ms, cpu.rank) = t.since();
    let t = Mark::now();
    let lids = assign_lids(f, &Guid2Lid::default(), c.lmc, c.max_lid).expect("lids");
    let lids_ms;
    (lids_ms, cpu.lids) = t.since();
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    let t = Mark::now();
    let routed = route_all(&ctx, EngineKind::Dmodc).expect("route");
    let route;
    (route, cpu.route) = t.since();
    let mut lfts = routed.lfts;
    let t = Mark::now();
    let rc = check_and_repair(&ctx, "dmodc", &mut lfts).expect("check");
    let check;
    (check, cpu.check) = t.since();
    assert!(rc.valid && rc.fallback == Fallback::None, "{rc:?}");
    drop(lfts);
    let total;
    (total, cpu.total) = t0.since();
    let wall = Stages {
        rank: rank_ms,
        lids: lids_ms,
        route,
        base: routed.base_ms,
        escape: routed.escape_ms,
        check,
        total,
    };
    (wall, cpu)
}

impl Stages {
    fn min(self, o: Stages) -> Stages {
        Stages {
            rank: self.rank.min(o.rank),
            lids: self.lids.min(o.lids),
            route: self.route.min(o.route),
            base: self.base.min(o.base),
            escape: self.escape.min(o.escape),
            check: self.check.min(o.check),
            total: self.total.min(o.total),
        }
    }
    fn worst() -> Stages {
        Stages {
            rank: f64::MAX,
            lids: f64::MAX,
            route: f64::MAX,
            base: f64::MAX,
            escape: f64::MAX,
            check: f64::MAX,
            total: f64::MAX,
        }
    }
    /// Wall times, with the split of `route`.
    fn show(&self) -> String {
        format!(
            "rank {:.0}, LID plan {:.0}, route {:.0} (base {:.0} + escape {:.0}), check {:.0} (sum {:.0})",
            self.rank, self.lids, self.route, self.base, self.escape, self.check, self.total
        )
    }
    /// CPU times (`route` not split).
    fn show_cpu(&self) -> String {
        format!(
            "rank {:.0}, LID plan {:.0}, route {:.0}, check {:.0} (sum {:.0})",
            self.rank, self.lids, self.route, self.check, self.total
        )
    }
}

/// One full routing through the public entry point: ranking, LID plan, [`route_all_checked`].
/// Returns (milliseconds, LFT bytes, whether the escape was written with the base).
fn full(f: &Fabric, c: &Case) -> (f64, usize, bool) {
    let t = Instant::now();
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), c.lmc, c.max_lid).expect("lids");
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    let (routed, rc) = route_all_checked(&ctx, EngineKind::Dmodc, None).expect("route");
    let elapsed = ms(t);
    assert!(rc.valid && rc.fallback == Fallback::None, "{rc:?}");
    (elapsed, routed.lfts.as_bytes().len(), routed.escape_shared)
}

/// [`full`] in the allocation of `spare` ([`route_all_reusing`], then the check, as
/// `route_all_checked` does): what a daemon pays when it recycles the tables of a generation
/// it no longer needs. Returns the tables, for the next call.
fn full_reusing(f: &Fabric, c: &Case, spare: Option<Lfts>) -> Lfts {
    let ranking = rank(f, &RankOptions::default());
    let lids = assign_lids(f, &Guid2Lid::default(), c.lmc, c.max_lid).expect("lids");
    let ctx = RoutingContext {
        fabric: f,
        ranking: &ranking,
        lids: &lids,
    };
    let mut routed = route_all_reusing(&ctx, EngineKind::Dmodc, None, spare).expect("route");
    let rc = check_and_repair(&ctx, "dmodc", &mut routed.lfts).expect("check");
    assert!(rc.valid && rc.fallback == Fallback::None, "{rc:?}");
    routed.lfts
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let cases = [
        Case {
            name: "8640_lmc1",
            spec: PGFT_8640,
            lmc: 1,
            max_lid: IB_MAX_UNICAST_LID,
        },
        Case {
            name: "34992_lmc0",
            spec: PGFT_34992,
            lmc: 0,
            max_lid: IB_MAX_UNICAST_LID,
        },
        Case {
            name: "34992_lmc1_24bit",
            spec: PGFT_34992,
            lmc: 1,
            max_lid: MAX_LID_24,
        },
        Case {
            name: "65536_lmc1_24bit",
            spec: PGFT_65536,
            lmc: 1,
            max_lid: MAX_LID_24,
        },
    ];
    let runs: usize = std::env::var("SCALE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!("scale: load average before {} ({runs} runs per figure)", loadavg());
    let mut base_t: [f64; 2] = [0.0; 2];
    for c in cases
        .iter()
        .filter(|c| filter.as_deref().is_none_or(|x| c.name.contains(x)))
    {
        let f = fabric(c.spec, 0);
        println!(
            "{} {}: {} switches, {} end ports, LMC {}, max LID {:#x}",
            c.name,
            c.spec,
            f.num_switches(),
            f.num_end_ports(),
            c.lmc,
            c.max_lid
        );
        // Both pools live through the case: a pool's threads exit some time after it is
        // dropped, and the CPU time of exited threads leaves `/proc/self/task`.
        let pools = [pool(1), pool(2)];
        // Memory: one full routing on 2 threads.
        let p2 = &pools[1];
        let rss0 = status_kb("VmRSS:");
        let hwm_reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let (_, lft_bytes, shared) = p2.install(|| full(&f, c));
        let rss = match (rss0, status_kb("VmHWM:"), hwm_reset) {
            (Some(a), Some(h), true) => {
                let grown = h.saturating_sub(a) * 1024;
                format!(
                    "{:.1} MB = {:.3} x LFT",
                    grown as f64 / 1e6,
                    grown as f64 / lft_bytes as f64
                )
            }
            _ => "n/a (no /proc/self/clear_refs)".into(),
        };
        println!(
            "  memory: LFT {:.1} MB (switches x LIDs); peak RSS growth during one full routing {rss}; RSS before {} MB",
            lft_bytes as f64 / 1e6,
            rss0.map_or(0, |k| k / 1024)
        );
        if c.lmc >= 1 {
            println!(
                "  escape: {}",
                if shared {
                    "written with the base LIDs (Up*/Down*'s preparation is Dmodc's)"
                } else {
                    "prepared and filled on its own"
                }
            );
        }
        let mut best = [0.0f64; 2];
        for (ti, threads) in [1usize, 2].into_iter().enumerate() {
            let p = &pools[ti];
            assert_eq!(p.current_num_threads(), threads);
            let mut totals = Vec::new();
            let mut cpus = Vec::new();
            for _ in 0..runs {
                let m = Mark::now();
                p.install(|| full(&f, c));
                let (w, cpu) = m.since();
                totals.push(w);
                cpus.push(cpu);
            }
            let (mut st, mut sc) = (Stages::worst(), Stages::worst());
            for _ in 0..runs.min(3) {
                let (w, cpu) = p.install(|| staged(&f, c));
                st = st.min(w);
                sc = sc.min(cpu);
            }
            let min = totals.iter().copied().fold(f64::MAX, f64::min);
            let med = median(&mut totals);
            let cpu = median(&mut cpus);
            best[ti] = min;
            println!(
                "  t{threads}: full routing best {min:.0} ms, median {med:.0} ms, CPU {cpu:.0} ms (median) | load {}",
                loadavg()
            );
            // Reusing the previous routing's tables (the first routing only provides them).
            let (mut rw, mut rc) = (Vec::new(), Vec::new());
            let mut spare = Some(p.install(|| full_reusing(&f, c, None)));
            for _ in 0..runs {
                let m = Mark::now();
                spare = Some(p.install(|| full_reusing(&f, c, spare.take())));
                let (w, cpu) = m.since();
                rw.push(w);
                rc.push(cpu);
            }
            drop(spare);
            let rmin = rw.iter().copied().fold(f64::MAX, f64::min);
            println!(
                "      reusing the previous tables: best {rmin:.0} ms, median {:.0} ms, CPU {:.0} ms (median)",
                median(&mut rw),
                median(&mut rc)
            );
            println!("      stages wall (best, ms): {}", st.show());
            println!("      stages CPU  (best, ms): {}", sc.show_cpu());
        }
        if c.name.starts_with("8640") {
            base_t = best;
        }
        let ratio = |t: f64, b: f64| if b > 0.0 { format!("{:.2}", t / b) } else { "-".into() };
        println!(
            "  t1/t2 = {:.2}; vs 8 640 nodes: t1 x{}, t2 x{}",
            best[0] / best[1],
            ratio(best[0], base_t[0]),
            ratio(best[1], base_t[1])
        );
    }
    println!("scale: load average after {}", loadavg());
}
