//! A full recomputation ([`ComputeInput::full`], a forced reroute) takes over nothing computed
//! for the previous generation and gives the same result as the generation that reuses it.

use std::sync::Arc;

use fabric_routing::incremental::{FullReason, RoutePath};
use fabric_routing::EngineKind;

use super::{compute, ComputeInput, Computed};

/// The input of the generation after `first` on the same fabric (nothing changed): the loop's
/// reuse fields filled from `first` as the event loop fills them.
fn next_of(first: &Computed) -> ComputeInput {
    ComputeInput {
        job: 2,
        engine: EngineKind::Dmodc,
        installed: first.lfts.clone(),
        installed_lids: Some(first.lids.clone()),
        previous_lids: first.guid2lid.clone(),
        lids_reusable: true,
        installed_ports_in_use: Some(first.ports_in_use.clone()),
        reuse_partitions: Some((first.partitions.clone(), first.pkeys.clone())),
        previous_partitions: Some(first.partitions.clone()),
        installed_pkeys: first.pkeys.clone(),
        installed_mcast: first.mcast.clone(),
        previous_routing: first.routing_state.clone(),
        ..ComputeInput::from_scratch(first.physical.clone(), vec![])
    }
}

#[test]
fn a_full_recomputation_reuses_nothing_and_gives_the_same_generation() {
    let f = fabric_topology::gen::generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap();
    let first = compute(ComputeInput {
        job: 1,
        engine: EngineKind::Dmodc,
        ..ComputeInput::from_scratch(Arc::new(f), vec![])
    })
    .unwrap();
    assert!(first.routing_state.is_some(), "Dmodc leaves a state to route from");
    let reusing = compute(next_of(&first)).unwrap();
    // What the reuse fields do (so the full recomputation below has something to skip).
    assert_eq!(reusing.route_path.name(), "incremental");
    assert!(Arc::ptr_eq(&reusing.partitions, &first.partitions));
    assert!(
        Arc::ptr_eq(&reusing.guid2lid, &first.guid2lid),
        "the LID plan is reused"
    );
    assert!(!reusing.full);

    let full = compute(ComputeInput {
        full: true,
        ..next_of(&first)
    })
    .unwrap();
    assert!(full.full);
    assert_eq!(full.route_path, RoutePath::Full(FullReason::NoPrevious));
    assert!(
        !Arc::ptr_eq(&full.partitions, &first.partitions),
        "partitions resolved again"
    );
    assert!(!Arc::ptr_eq(&full.pkeys, &first.pkeys), "P_Key tables built again");
    assert!(!Arc::ptr_eq(&full.guid2lid, &first.guid2lid), "LIDs assigned again");
    assert!(!Arc::ptr_eq(&full.ports_in_use, &first.ports_in_use));
    // The same generation as the one that reuses: same LIDs, tables, partitions; nothing to
    // write.
    assert_eq!(full.lids, reusing.lids);
    assert_eq!(*full.guid2lid, *reusing.guid2lid);
    assert_eq!(full.lfts, reusing.lfts);
    assert_eq!(*full.partitions, *reusing.partitions);
    assert_eq!(*full.pkeys, *reusing.pkeys);
    assert_eq!(*full.ports_in_use, *reusing.ports_in_use);
    assert!(!full.lids_changed);
    assert!(full.writes.is_empty() && full.side.pkey.is_empty() && full.side.mft.is_empty());
}
