//! The order of one port's P_Key table.

use crate::pkey::{base, DEFAULT_PKEY};

/// Orders a port's entries (`entries`: one per partition, bit 15 = full) into its table.
///
/// Index 0: the `indx0` partition if the port is in it, else the default partition if the
/// port is in it and `previous` does not keep another P_Key there. Every entry whose partition
/// `previous` holds stays at its index (OpenSM keeps the indices a port has). The others fill the
/// free entries in ascending P_Key order. Returns the table (trailing free entries cut, free
/// entries between used ones are 0) and the entries that did not fit in `capacity`.
pub(crate) fn order_table(
    entries: &[u16],
    indx0: Option<u16>,
    previous: Option<&[u16]>,
    capacity: usize,
) -> (Vec<u16>, Vec<u16>) {
    let value_of = |b: u16| entries.iter().copied().find(|&e| base(e) == b);
    let forced0 = indx0.filter(|&b| value_of(b).is_some());
    let mut slots: Vec<u16> = Vec::new();
    let mut placed: Vec<u16> = Vec::with_capacity(entries.len());
    let put = |slots: &mut Vec<u16>, i: usize, v: u16| {
        if slots.len() <= i {
            slots.resize(i + 1, 0);
        }
        slots[i] = v;
    };
    if capacity == 0 {
        return (Vec::new(), sorted(entries));
    }
    if let Some(prev) = previous {
        for (i, &e) in prev.iter().enumerate().take(capacity) {
            let b = base(e);
            if b == 0 || placed.contains(&b) {
                continue;
            }
            let moved_to_0 = forced0 == Some(b) && i != 0;
            let displaced = i == 0 && forced0.is_some_and(|f| f != b);
            if moved_to_0 || displaced {
                continue;
            }
            if let Some(v) = value_of(b) {
                put(&mut slots, i, v);
                placed.push(b);
            }
        }
    }
    let slot0_free = slots.first().is_none_or(|&v| v == 0);
    if let Some(b) = forced0 {
        if !placed.contains(&b) {
            if let Some(v) = value_of(b) {
                put(&mut slots, 0, v);
                placed.push(b);
            }
        }
    } else if slot0_free && !placed.contains(&DEFAULT_PKEY) {
        if let Some(v) = value_of(DEFAULT_PKEY) {
            put(&mut slots, 0, v);
            placed.push(DEFAULT_PKEY);
        }
    }
    let mut dropped = Vec::new();
    let mut next = 0usize;
    for v in sorted(entries) {
        if placed.contains(&base(v)) {
            continue;
        }
        while next < slots.len() && slots[next] != 0 {
            next += 1;
        }
        if next >= capacity {
            dropped.push(v);
            continue;
        }
        put(&mut slots, next, v);
        placed.push(base(v));
    }
    while slots.last() == Some(&0) {
        slots.pop();
    }
    (slots, dropped)
}

/// Entries ascending by partition, one per partition.
fn sorted(entries: &[u16]) -> Vec<u16> {
    let mut v = entries.to_vec();
    v.sort_unstable_by_key(|&e| base(e));
    v.dedup_by_key(|e| base(*e));
    v
}
