//! P_Key tables as the daemon installs them: the target of a generation (from the resolved
//! partitions), what the ports hold as far as the daemon knows, and the PartitionTable blocks
//! to write between the two.
//!
//! A table is written block by block (32 P_Keys each); a port whose table shrank gets zeroed
//! blocks up to its old length, so no stale P_Key stays behind.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fabric_partitions::PartitionTables;
use fabric_southbound::{PkeyBlockWrite, PkeyPort, PKEY_BLOCK_SIZE};
use fabric_topology::Fabric;

/// Per port, its whole P_Key table (bit 15 = full member; 0 = empty entry).
pub type PkeyState = BTreeMap<PkeyPort, Vec<u16>>;

/// The P_Key tables a generation programs: every end port's table, every switch's management
/// port 0 table and, with `enforce`, the enforcement table of the switch port facing each end
/// port.
pub fn target(partitions: &PartitionTables, fabric: &Fabric, enforce: bool) -> PkeyState {
    let mut out = PkeyState::new();
    for s in fabric.switch_ids() {
        let g = fabric.switch(s).guid;
        if let Some(t) = partitions.table(g) {
            out.insert(PkeyPort::SwitchPort(g, 0), t.to_vec());
        }
    }
    for e in fabric.end_port_ids() {
        let ep = fabric.end_port(e);
        if let Some(t) = partitions.table(ep.port_guid) {
            out.insert(PkeyPort::EndPort(ep.port_guid), t.to_vec());
        }
        if enforce {
            if let Some((s, p)) = ep.attach {
                let sg = fabric.switch(s).guid;
                if let Some(t) = partitions.switch_port_table(sg, p) {
                    out.insert(PkeyPort::SwitchPort(sg, p), t.to_vec());
                }
            }
        }
    }
    out
}

/// Whether `port` can be written now: an end port that is up and cabled, or a live switch.
pub fn port_reachable(physical: &Fabric, port: PkeyPort) -> bool {
    match port {
        PkeyPort::EndPort(g) => physical.end_port_by_guid(g).is_some_and(|e| {
            let ep = physical.end_port(e);
            ep.up && ep.attach.is_some_and(|(s, _)| physical.switch(s).up)
        }),
        PkeyPort::SwitchPort(g, _) => physical.switch_by_guid(g).is_some_and(|s| physical.switch(s).up),
    }
}

/// The blocks of `target` to write: those that differ from `installed` (a shorter table
/// compares as zeros beyond its end), every block of the `resync` ports, zeroed blocks for the
/// installed ports `target` no longer programs (enforcement turned off: the driver clears the
/// port's enforcement with its table), nothing for ports the driver cannot reach now (returned
/// in the second list: they stay to be written).
pub fn select_pkey_writes(
    physical: &Fabric,
    installed: &PkeyState,
    target: &PkeyState,
    resync: &BTreeSet<PkeyPort>,
) -> (Vec<PkeyBlockWrite>, Vec<PkeyPort>) {
    let mut writes = Vec::new();
    let mut skipped = Vec::new();
    let empty: Vec<u16> = Vec::new();
    let dropped = installed
        .keys()
        .filter(|p| !target.contains_key(p))
        .map(|&p| (p, &empty));
    for (port, table) in target.iter().map(|(&p, t)| (p, t)).chain(dropped) {
        let old = installed.get(&port).unwrap_or(&empty);
        let full = resync.contains(&port) || !installed.contains_key(&port);
        let blocks = table.len().max(old.len()).div_ceil(PKEY_BLOCK_SIZE).max(1);
        let mut port_writes = Vec::new();
        for b in 0..blocks {
            let new_block = block_of(table, b);
            if full || new_block != block_of(old, b) {
                port_writes.push(PkeyBlockWrite {
                    port,
                    block: u16::try_from(b).unwrap_or(u16::MAX),
                    entries: new_block,
                });
            }
        }
        if port_writes.is_empty() {
            continue;
        }
        if port_reachable(physical, port) {
            writes.extend(port_writes);
        } else {
            skipped.push(port);
        }
    }
    (writes, skipped)
}

/// Block `b` of `table`, zero-padded.
fn block_of(table: &[u16], b: usize) -> [u16; PKEY_BLOCK_SIZE] {
    let mut out = [0u16; PKEY_BLOCK_SIZE];
    let start = b * PKEY_BLOCK_SIZE;
    if start < table.len() {
        let end = (start + PKEY_BLOCK_SIZE).min(table.len());
        out[..end - start].copy_from_slice(&table[start..end]);
    }
    out
}

/// [`fold_written`] sharing `target` when every write went through and nothing was skipped
/// (the result is then `target` itself): the next generation, whose reused target is the same
/// `Arc`, selects only its resync ports ([`select_resync_writes`]) instead of comparing every
/// port's table.
pub fn fold_written_shared(
    installed: &Arc<PkeyState>,
    target: &Arc<PkeyState>,
    failed: &BTreeSet<PkeyPort>,
    skipped: &[PkeyPort],
) -> Arc<PkeyState> {
    if failed.is_empty() && skipped.is_empty() {
        return target.clone();
    }
    Arc::new(fold_written(installed, target, failed, skipped))
}

/// [`select_pkey_writes`] when the ports hold exactly `target` (the same `Arc` as the
/// installed state): only the `resync` ports' whole tables (those in `target`), in the same
/// order.
pub fn select_resync_writes(
    physical: &Fabric,
    target: &PkeyState,
    resync: &BTreeSet<PkeyPort>,
) -> (Vec<PkeyBlockWrite>, Vec<PkeyPort>) {
    let sub: PkeyState = resync
        .iter()
        .filter_map(|p| target.get(p).map(|t| (*p, t.clone())))
        .collect();
    select_pkey_writes(physical, &sub, &sub, resync)
}

/// `installed` after `writes` went through but for the ports listed in `failed`: the tables
/// of the written ports become their target ones.
pub fn fold_written(
    installed: &PkeyState,
    target: &PkeyState,
    failed: &BTreeSet<PkeyPort>,
    skipped: &[PkeyPort],
) -> PkeyState {
    let mut out = installed.clone();
    // Ports no longer programmed whose zeroed table went through are forgotten.
    out.retain(|p, _| target.contains_key(p) || failed.contains(p) || skipped.contains(p));
    for (port, table) in target {
        if failed.contains(port) || skipped.contains(port) {
            continue;
        }
        out.insert(*port, table.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_topology::gen::generate_str;

    fn fabric() -> Fabric {
        generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap()
    }

    #[test]
    fn only_changed_blocks_are_written_and_shrunk_tables_are_zeroed() {
        let f = fabric();
        let g = f.end_port(fabric_topology::EndPortId(0)).port_guid;
        let port = PkeyPort::EndPort(g);
        let mut installed = PkeyState::new();
        let mut long = vec![0xffffu16];
        long.extend((1..40).map(|i| 0x8000 | i));
        installed.insert(port, long);
        let mut target = PkeyState::new();
        target.insert(port, vec![0xffff, 0x8001]);
        let (w, skipped) = select_pkey_writes(&f, &installed, &target, &BTreeSet::new());
        assert!(skipped.is_empty());
        // Block 0 changed (entries 2.. cleared), block 1 must be zeroed.
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].block, 0);
        assert_eq!(&w[0].entries[..3], &[0xffff, 0x8001, 0]);
        assert_eq!(w[1].block, 1);
        assert!(w[1].entries.iter().all(|&e| e == 0));
        // Nothing changed: nothing written; a resync writes the table again.
        let (w, _) = select_pkey_writes(&f, &target, &target, &BTreeSet::new());
        assert!(w.is_empty());
        let (w, _) = select_pkey_writes(&f, &target, &target, &[port].into_iter().collect());
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn ports_no_longer_programmed_get_zeroed_tables_and_are_forgotten() {
        let f = fabric();
        let sw = f.switch(fabric_topology::SwitchId(0)).guid;
        let port = PkeyPort::SwitchPort(sw, 1);
        let mut installed = PkeyState::new();
        installed.insert(port, vec![0xffff, 0x8001]);
        let (w, skipped) = select_pkey_writes(&f, &installed, &PkeyState::new(), &BTreeSet::new());
        assert!(skipped.is_empty());
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].port, port);
        assert!(w[0].entries.iter().all(|&e| e == 0));
        assert!(fold_written(&installed, &PkeyState::new(), &BTreeSet::new(), &[]).is_empty());
        // Not written (failed): still known as installed, written again next time.
        let failed: BTreeSet<PkeyPort> = [port].into_iter().collect();
        assert_eq!(fold_written(&installed, &PkeyState::new(), &failed, &[]), installed);
    }

    #[test]
    fn unreachable_ports_are_skipped_and_stay_to_write() {
        let f = fabric();
        let e = fabric_topology::EndPortId(1);
        let g = f.end_port(e).port_guid;
        let down = f.apply(&[fabric_topology::FabricEvent::EndPortDown(g)]).unwrap();
        let mut target = PkeyState::new();
        target.insert(PkeyPort::EndPort(g), vec![0xffff]);
        let (w, skipped) = select_pkey_writes(&down, &PkeyState::new(), &target, &BTreeSet::new());
        assert!(w.is_empty());
        assert_eq!(skipped, vec![PkeyPort::EndPort(g)]);
        let folded = fold_written(&PkeyState::new(), &target, &BTreeSet::new(), &skipped);
        assert!(folded.is_empty(), "a skipped port is not recorded as written");
    }

    /// When every write went through the installed state is the target itself (shared), and
    /// the resync-only selection equals the full comparison of the target with itself, for
    /// any resync set (ports of the target, unknown ports, unreachable ports); a failed or
    /// skipped port keeps the folded copy apart.
    #[test]
    fn shared_installed_tables_select_only_the_resync_ports_as_the_full_diff_does() {
        let f = fabric();
        let parts = fabric_partitions::resolve_with(
            &fabric_partitions::PartitionConfig::default_opensm(),
            &f,
            None,
            &fabric_partitions::ResolveOptions::default(),
            None,
        );
        let target = Arc::new(target(&parts, &f, true));
        assert!(target.len() > 8);
        let empty = Arc::new(PkeyState::new());
        let shared = fold_written_shared(&empty, &target, &BTreeSet::new(), &[]);
        assert!(Arc::ptr_eq(&shared, &target));
        let g = f.end_port(fabric_topology::EndPortId(1)).port_guid;
        let down = f.apply(&[fabric_topology::FabricEvent::EndPortDown(g)]).unwrap();
        let ports: Vec<PkeyPort> = target.keys().copied().collect();
        for (i, physical) in [&f, &down].into_iter().enumerate() {
            for step in [1usize, 3, 5] {
                let mut resync: BTreeSet<PkeyPort> = ports.iter().copied().step_by(step).collect();
                resync.insert(PkeyPort::EndPort(0xdead));
                resync.insert(PkeyPort::EndPort(g));
                let want = select_pkey_writes(physical, &target, &target, &resync);
                assert!(!want.0.is_empty());
                assert_eq!(want.1.is_empty(), i == 0);
                assert_eq!(select_resync_writes(physical, &target, &resync), want, "step {step}");
            }
        }
        let failed: BTreeSet<PkeyPort> = [ports[0]].into_iter().collect();
        let kept = fold_written_shared(&empty, &target, &failed, &[]);
        assert!(!Arc::ptr_eq(&kept, &target));
        assert!(!kept.contains_key(&ports[0]));
        let kept = fold_written_shared(&empty, &target, &BTreeSet::new(), &[ports[1]]);
        assert!(!Arc::ptr_eq(&kept, &target) && !kept.contains_key(&ports[1]));
    }
}
