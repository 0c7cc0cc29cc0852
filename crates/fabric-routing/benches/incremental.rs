//! Incremental re-routing after a single-cable fault (issue #17, Deliver 4) against the full
//! routing of the same snapshot ([`route_all_checked`]), on
//!
//! * `PGFT(3;24,12,30;1,12,12;1,2,1)`: 8 640 nodes, LMC 1,
//! * `PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)`: 34 992 nodes, LMC 1, 24-bit addresses,
//! * `PGFT(3;32,32,64;1,32,32;1,1,1)`: 65 536 nodes, LMC 1, 24-bit addresses
//!
//! (LMC 1: the five-phase update's escape LIDs). Per fabric: `--faults N` (default 10)
//! different inter-switch cables taken down one at a time, each followed by its restoration,
//! as in the daemon: every generation routed incrementally from the previous generation's
//! state (so that from the third generation on the target tables recycle the allocation of
//! the generation before the previous one, copying only the rows it changed), and the fault
//! also in full (ranking excluded from both: the daemon ranks every generation either way);
//! every incremental result is compared with the full one (tables and check). Prints the
//! median and max of both, the stage split of the incremental path (with the rows copied into
//! the target) and the rows it re-filled; the machine load (`/proc/loadavg`) before and after,
//! the CPU time of the incremental routing (all threads) and the peak resident set of each
//! fabric's run.
//! On the default rayon pool (the daemon's routing pool).
//!
//! `cargo bench -p fabric-routing --bench incremental [-- FILTER] [--faults N] [--no-full]`
//! (FILTER: a substring of the fabric names; `--no-full`: no full routing and no comparison,
//! for profiling the incremental path alone).

mod support;

use std::sync::Arc;
use std::time::Instant;

use fabric_ranking::{rank, RankOptions};
use fabric_routing::incremental::{route_checked_incremental, RoutePath, StageTimes};
use fabric_routing::{assign_lids, route_all_checked, EngineKind, Guid2Lid, RoutingCheck, RoutingContext};
use fabric_topology::{FabricEvent, Remote};
use support::{fabric, PGFT_34992, PGFT_8640};

const PGFT_65536: &str = "PGFT(3;32,32,64;1,32,32;1,1,1)";

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// CPU time of the process so far (every thread, `/proc/self/task/*/schedstat`), ns: the
/// incremental routing's cost independent of the machine's load.
fn cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
                .sum()
        })
        .unwrap_or(0)
}

/// Peak resident set (`VmHWM`, kB) since the last [`reset_peak`].
fn peak_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets the peak resident set (Linux `clear_refs` 5); ignored where unsupported.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn untimed(c: &RoutingCheck) -> RoutingCheck {
    RoutingCheck {
        check_ms: 0.0,
        fallback_ms: 0.0,
        ..c.clone()
    }
}

fn main() {
    let mut filter = None;
    let mut faults = 10usize;
    let mut no_full = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--faults" => faults = it.next().and_then(|v| v.parse().ok()).unwrap_or(faults),
            "--bench" => {}
            "--no-full" => no_full = true,
            s => filter = Some(s.to_string()),
        }
    }
    println!("load before: {}", loadavg());
    for (name, spec, max_lid) in [
        ("8640", PGFT_8640, 0xBFFF),
        ("34992", PGFT_34992, 0xFF_FFFF),
        ("65536", PGFT_65536, 0xFF_FFFF),
    ] {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        reset_peak();
        let intact = Arc::new(fabric(spec, 0));
        let lids = assign_lids(&intact, &Guid2Lid::default(), 1, max_lid).expect("LIDs");
        let ranking0 = rank(&intact, &RankOptions::default());
        let t = Instant::now();
        let first = route_checked_incremental(&intact, &ranking0, &lids, EngineKind::Dmodc, None, None).expect("route");
        let first_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut state = first.state.expect("dmodc keeps a state");
        drop(first.lfts);
        let mut cables = Vec::new();
        for s in intact.switch_ids() {
            for (pn, p) in intact.switch(s).external_ports() {
                if let Remote::Switch { sw, port } = p.remote {
                    if (sw, port) > (s, pn) {
                        cables.push((intact.switch(s).guid, pn));
                    }
                }
            }
        }
        let step = (cables.len() / faults.max(1)).max(1);
        let (mut inc, mut full) = (Vec::new(), Vec::new());
        let mut inc_cpu = Vec::new();
        let mut times = Vec::new();
        let mut rows = Vec::new();
        let mut copied = Vec::new();
        for i in 0..faults {
            let (switch, port) = cables[(i * step) % cables.len()];
            // The cable's levels (ranking of the intact fabric; 0 = leaves).
            let sw = intact.switch_by_guid(switch).expect("switch");
            let far = match intact.switch(sw).external_ports().find(|(pn, _)| *pn == port) {
                Some((_, p)) => match p.remote {
                    Remote::Switch { sw, .. } => Some(sw),
                    _ => None,
                },
                None => None,
            };
            let lvl = |s: Option<fabric_topology::SwitchId>| {
                s.and_then(|s| ranking0.level[s.idx()])
                    .map_or("?".to_string(), |l| l.to_string())
            };
            let cable = format!("level {}-{} cable", lvl(Some(sw)), lvl(far));
            let f = Arc::new(intact.apply(&[FabricEvent::LinkDown { switch, port }]).expect("fault"));
            let ranking = rank(&f, &RankOptions::default());
            let (t, c) = (Instant::now(), cpu_ns());
            let r = route_checked_incremental(&f, &ranking, &lids, EngineKind::Dmodc, None, Some(&state))
                .expect("incremental");
            inc.push(t.elapsed().as_secs_f64() * 1e3);
            inc_cpu.push((cpu_ns() - c) as f64 / 1e6);
            let ctx = RoutingContext {
                fabric: &f,
                ranking: &ranking,
                lids: &lids,
            };
            if !no_full {
                let t = Instant::now();
                let (want, want_check) = route_all_checked(&ctx, EngineKind::Dmodc, None).expect("full");
                full.push(t.elapsed().as_secs_f64() * 1e3);
                assert!(*r.lfts == want.lfts, "{name} fault {i}: tables differ");
                assert_eq!(untimed(&r.check), untimed(&want_check), "{name} fault {i}");
                drop(want);
            }
            let down = r.state.expect("dmodc keeps a state");
            match r.path {
                RoutePath::Incremental(s) => {
                    copied.push(s.copied_rows as f64);
                    rows.push((
                        cable,
                        s.base_rows,
                        s.base_partial_rows,
                        s.switch_lid_rows,
                        s.escape_rows,
                        s.changed_entries,
                        s.full_check,
                    ));
                    times.push(s.times);
                }
                p => println!("  fault {i}: {}", p.name()),
            }
            drop(r.lfts);
            // The restoration, from the fault's state (the state before the fault dropped, as
            // the daemon does once the fault's generation is installed): the next fault starts
            // from it.
            state = down;
            let up = route_checked_incremental(&intact, &ranking0, &lids, EngineKind::Dmodc, None, Some(&state))
                .expect("incremental restoration");
            drop(up.lfts);
            state = up.state.expect("dmodc keeps a state");
        }
        let stage = |f: fn(&StageTimes) -> f64| median(&mut times.iter().map(f).collect::<Vec<_>>());
        println!(
            "{spec} (LMC 1, {} switches, top LID {}): first routing {first_ms:.0} ms",
            intact.num_switches(),
            lids.top()
        );
        let maxv = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        println!(
            "  {faults} single-cable faults: incremental median {:.1} ms (max {:.1}), full median {:.1} ms (max {:.1}), {} incremental",
            median(&mut inc.clone()),
            maxv(&inc),
            median(&mut full.clone()),
            maxv(&full),
            rows.len()
        );
        println!(
            "  incremental CPU (all threads): median {:.1} ms (max {:.1})",
            median(&mut inc_cpu.clone()),
            maxv(&inc_cpu)
        );
        println!(
            "  incremental stages (median ms): prep {:.1}, escape prep {:.1}, dirty rows {:.1}, copy {:.1}, re-fill {:.1}, check {:.1}",
            stage(|t| t.prep_ms),
            stage(|t| t.escape_prep_ms),
            stage(|t| t.dirty_ms),
            stage(|t| t.copy_ms),
            stage(|t| t.fill_ms),
            stage(|t| t.check_ms)
        );
        println!(
            "  rows copied into the target: median {:.0} of {} (max {:.0}; all of them when no allocation could be recycled)",
            median(&mut copied.clone()),
            intact.num_switches(),
            maxv(&copied)
        );
        println!(
            "  peak memory (VmHWM) {:.0} MB; one table set {:.0} MB",
            peak_kb() as f64 / 1024.0,
            (intact.num_switches() as f64) * f64::from(lids.top() + 1) / (1024.0 * 1024.0)
        );
        for (i, (cable, b, bp, s, e, c, fc)) in rows.iter().enumerate() {
            println!(
                "  fault {i} ({cable}): rows re-filled: base {b} ({bp} of them only for the changed leaves' destinations), switch LIDs {s}, escape {e}; {c} entries changed; full check {fc}"
            );
        }
    }
    println!("load after: {}", loadavg());
}
