//! What a generation uploads: the LFT blocks that differ from what the switches hold (plus the
//! dirty blocks and whole resync switches), and the ports the new tables forward through
//! ([`PortUse`], for the five-phase update), in one parallel pass over the switches.
//!
//! The pass costs one comparison of each switch's row with its installed row (a `memcmp` at
//! memory speed); only the rows that differ are compared block by block and scanned for the
//! ports they use. The other rows take their port set from the installed generation's
//! [`PortUse`] when the caller has it for exactly the installed tables: after a single fault
//! most rows are unchanged, so a 35 000-node generation scans a few hundred rows instead of
//! 6 804 (see `docs/operations.md`, "Daemon at scale").

use std::collections::BTreeSet;

use fabric_routing::{LftBlockDiff, Lfts, BLOCK_SIZE, NO_ROUTE};
use fabric_topology::{Fabric, SwitchId};
use rayon::prelude::*;

/// Per switch, per port: whether some LFT entry of a routing forwards through the port
/// (port 0, the switch itself, and [`fabric_routing::NO_ROUTE`] excluded). One 256-bit set per
/// switch, indexed by dense switch id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortUse {
    bits: Vec<[u64; 4]>,
}

impl PortUse {
    /// The ports `lfts` forwards through (one rayon task per switch).
    pub fn of(lfts: &Lfts) -> PortUse {
        let bits = (0..lfts.num_switches())
            .into_par_iter()
            .map(|s| row_ports(lfts.row(SwitchId(s as u32))))
            .collect();
        PortUse { bits }
    }

    /// Whether some entry of switch `sw` forwards through `port` (false for unknown switches).
    pub fn in_use(&self, sw: SwitchId, port: fabric_topology::PortNum) -> bool {
        self.bits
            .get(sw.idx())
            .is_some_and(|set| set[(port >> 6) as usize] & (1 << (port & 63)) != 0)
    }

    /// Number of switches it describes (0: not computed).
    pub fn num_switches(&self) -> usize {
        self.bits.len()
    }
}

/// The port set of one LFT row (LID 0 is not a LID).
fn row_ports(row: &[u8]) -> [u64; 4] {
    // Branch-free scan of the row, then the bit set.
    let mut seen = [false; 256];
    for &port in row.iter().skip(1) {
        seen[port as usize] = true;
    }
    seen[0] = false;
    seen[NO_ROUTE as usize] = false;
    let mut set = [0u64; 4];
    for (port, _) in seen.iter().enumerate().filter(|(_, &u)| u) {
        set[port >> 6] |= 1 << (port & 63);
    }
    set
}

/// Whether [`select`] builds the new tables' [`PortUse`].
#[derive(Clone, Copy, Debug)]
pub enum PortsWanted<'a> {
    /// No (an empty [`PortUse`]).
    No,
    /// Yes, every row scanned.
    Scan,
    /// Yes, reusing the set of every row equal to its installed row from this [`PortUse`] of
    /// the installed tables (ignored unless it covers every installed switch).
    Reuse(&'a PortUse),
}

/// What [`select`] found.
#[derive(Debug, Default)]
pub struct Selected {
    /// Blocks to upload, switch-major.
    pub writes: Vec<LftBlockDiff>,
    /// Blocks that differ (or are due) on physically dead switches: not written.
    pub skipped: Vec<(u32, u32)>,
    pub ports_in_use: PortUse,
}

/// The blocks of `new` to upload: those that differ from `installed` (blocks it does not cover
/// count as all [`NO_ROUTE`]), the `dirty` ones and every block of the `resync` switches;
/// blocks of physically dead switches are skipped. Also the ports `new` forwards through, as
/// `ports` asks.
pub fn select(
    physical: &Fabric,
    installed: &Lfts,
    new: &Lfts,
    dirty: &BTreeSet<(u32, u32)>,
    resync: &BTreeSet<u32>,
    ports: PortsWanted<'_>,
) -> Selected {
    select_known(physical, installed, new, dirty, resync, ports, None)
}

/// [`select`] where the caller knows rows of `new` equal to their `installed` row: where
/// `known_same[s]` is true the row is not compared (the incremental routing re-fills only some
/// rows of a copy of the installed tables: the others are equal by construction).
pub fn select_known(
    physical: &Fabric,
    installed: &Lfts,
    new: &Lfts,
    dirty: &BTreeSet<(u32, u32)>,
    resync: &BTreeSet<u32>,
    ports: PortsWanted<'_>,
    known_same: Option<&[bool]>,
) -> Selected {
    let empty = [NO_ROUTE; BLOCK_SIZE];
    let nb = new.num_blocks();
    let same_shape = installed.row_len() == new.row_len();
    let reuse = match ports {
        PortsWanted::Reuse(u) if u.num_switches() == installed.num_switches() => Some(u),
        _ => None,
    };
    let want_ports = !matches!(ports, PortsWanted::No);
    // One task per switch (rows are independent), results concatenated in switch order.
    type SwitchResult = (Vec<LftBlockDiff>, Vec<(u32, u32)>, [u64; 4]);
    let per_switch: Vec<SwitchResult> = (0..new.num_switches())
        .into_par_iter()
        .map(|s| {
            let sw = SwitchId(s as u32);
            let row = new.row(sw);
            let installed_row = (s < installed.num_switches()).then(|| installed.row(sw));
            let known = same_shape && known_same.is_some_and(|k| k.get(s).copied().unwrap_or(false));
            let unchanged = known || (same_shape && installed_row == Some(row));
            let ports = match (want_ports, unchanged, reuse) {
                (false, _, _) => [0; 4],
                (true, true, Some(u)) => u.bits[s],
                (true, _, _) => row_ports(row),
            };
            let full = resync.contains(&(s as u32));
            let due: Vec<u32> = dirty
                .range((s as u32, 0)..=(s as u32, u32::MAX))
                .map(|&(_, b)| b)
                .collect();
            let mut writes = Vec::new();
            let mut skipped = Vec::new();
            if unchanged && !full && due.is_empty() {
                return (writes, skipped, ports);
            }
            let up = s < physical.num_switches() && physical.switch(sw).up;
            for b in 0..nb {
                let nblk = &row[b * BLOCK_SIZE..(b + 1) * BLOCK_SIZE];
                let old = match installed_row {
                    Some(r) if b < installed.num_blocks() => &r[b * BLOCK_SIZE..(b + 1) * BLOCK_SIZE],
                    _ => &empty[..],
                };
                if full || nblk != old || due.binary_search(&(b as u32)).is_ok() {
                    if up {
                        let mut entries = [0u8; BLOCK_SIZE];
                        entries.copy_from_slice(nblk);
                        writes.push(LftBlockDiff {
                            switch: sw,
                            block: b as u32,
                            entries,
                        });
                    } else {
                        skipped.push((s as u32, b as u32));
                    }
                }
            }
            (writes, skipped, ports)
        })
        .collect();
    let mut out = Selected::default();
    let mut bits = Vec::with_capacity(if want_ports { per_switch.len() } else { 0 });
    for (w, k, p) in per_switch {
        out.writes.extend(w);
        out.skipped.extend(k);
        if want_ports {
            bits.push(p);
        }
    }
    out.ports_in_use = PortUse { bits };
    out
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
