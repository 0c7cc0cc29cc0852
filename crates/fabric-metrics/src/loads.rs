//! Per-port loads of the installed routing: how many paths of a pattern cross each directed
//! switch-to-switch port (the congestion heatmap of the daemon's dashboard).

use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

use fabric_routing::{Lfts, LidPlan};
use fabric_topology::Fabric;

use crate::index::{PathIndex, RoutedBits};
use crate::SwitchPort;

/// The load of one directed switch-to-switch port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortLoad {
    pub port: SwitchPort,
    /// All-to-all paths (ordered pairs of live end ports) crossing the port: the per-port
    /// edge-forwarding index whose maximum is `xi`.
    pub all_to_all: u64,
    /// The largest number of paths crossing the port in one shift permutation
    /// `SP_k(s) = (s + k) mod N`, over `k = 1..N-1` (0 when shifts were not asked); the
    /// maximum over ports is `mu_sp`.
    pub worst_shift: u32,
}

/// Per-port loads of one routed fabric, in channel order (switch id, then port).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PortLoads {
    /// Live end ports taking part (`N`).
    pub end_ports: usize,
    /// Whether [`PortLoad::worst_shift`] was computed.
    pub shifts: bool,
    pub ports: Vec<PortLoad>,
}

/// Computes, for every live directed switch-to-switch port, the number of all-to-all paths
/// crossing it and (with `shifts`) the largest number of paths of one shift permutation
/// crossing it. Never fails: unrouted pairs carry no path (as in [`crate::compute`]).
pub fn port_loads(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts, shifts: bool) -> PortLoads {
    let idx = PathIndex::new(fabric, lids, lfts);
    let n = idx.num_live();
    let nch = idx.num_channels();
    let (progress, cancel) = (crate::Progress::new(), AtomicBool::new(false));
    // Never cancelled: `None` cannot happen.
    let Some(scan) = crate::scan::scan_destinations(&idx, true, &progress, &cancel) else {
        return PortLoads::default();
    };
    let runs = crate::shifts::leaf_runs(&idx);
    let worst = if !shifts || n < 2 {
        vec![0; nch]
    } else if crate::shifts::ranges_pay_off(&idx, runs.len()) {
        crate::shifts::all_shifts(
            &idx,
            &scan.bits,
            &runs,
            true,
            false,
            crate::shifts::RANGE_BUDGET,
            &progress,
            &cancel,
        )
        .map(|r| r.per_channel)
        .unwrap_or_else(|| vec![0; nch])
    } else {
        shift_maxima(&idx, &scan.bits)
    };
    let mut ports: Vec<PortLoad> = (0..nch as u32)
        .map(|c| PortLoad {
            port: idx.channel(c),
            all_to_all: scan.xi[c as usize],
            worst_shift: worst[c as usize],
        })
        .collect();
    ports.sort_by_key(|p| p.port);
    PortLoads {
        end_ports: n,
        shifts,
        ports,
    }
}

/// Per channel: the largest count of paths crossing it over every shift permutation.
fn shift_maxima(idx: &PathIndex<'_>, bits: &RoutedBits) -> Vec<u32> {
    let n = idx.num_live() as u32;
    let nch = idx.num_channels();
    (1..n)
        .into_par_iter()
        .fold(
            || (vec![0u32; nch], vec![0u32; nch]),
            |(mut counts, mut max), k| {
                counts.fill(0);
                for s in 0..n {
                    let d = (s + k) % n;
                    let li = idx.leaf_of[s as usize];
                    if bits.get(li, d) {
                        idx.walk(idx.leaves[li as usize], d, |c| counts[c as usize] += 1);
                    }
                }
                for (m, &c) in max.iter_mut().zip(&counts) {
                    *m = (*m).max(c);
                }
                (counts, max)
            },
        )
        .map(|(_, max)| max)
        .reduce(
            || vec![0u32; nch],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    *x = (*x).max(*y);
                }
                a
            },
        )
}
