//! LID plan: `2^LMC` consecutive LIDs per end port, the first aligned to `2^LMC` (LMC 0..=7,
//! IBA §7.11.1 / §14.2.5.6 PortInfo:LMC), one LID per switch.
//!
//! **Offsets** (issue #19, Slim Fly paper seed 003 §5.1: "layer `i` on LID offset `i`"): an end
//! port's LIDs are `base + o`, `o` in `0..2^LMC`. With LMC ≥ 1 the **last** offset `2^LMC − 1` is
//! the *escape* LID (Up*/Down*, the five-phase update's deadlock-free detour, its own SL) and
//! the offsets `0..2^LMC − 1` carry the base routing's *layers* ([`LidPlan::layer_offsets`]):
//!
//! | LMC | LIDs per end port | layer offsets | escape offset |
//! |-----|-------------------|---------------|---------------|
//! | 0   | 1                 | 0             | —             |
//! | 1   | 2 (`2k`, `2k+1`)  | 0             | 1             |
//! | 2   | 4                 | 0, 1, 2       | 3             |
//! | 3   | 8                 | 0..=6         | 7             |
//!
//! LMC 1 is exactly the former pair (base `2k`, escape `2k + 1`). Every layer offset is a
//! "base" LID for the update protocol and the checks; a single-table engine's routes are
//! repeated on every layer offset, a layered multipath routing (`layered:K`) puts layer `i`
//! on offset `i` (see [`crate::route_all`]). The plan always reserves the escape offset when
//! LMC ≥ 1 (the daemon routes escape LIDs whenever it has them), so `K ≤ 2^LMC − 1`.
//!
//! Assignment ([`assign_lids`]) is stable: LIDs recorded in the previous assignment (a
//! [`Guid2Lid`], which reads and writes OpenSM's `guid2lid` file) are kept for the GUIDs that are
//! still in the fabric, and stay reserved for the GUIDs that are not, so that a port coming back
//! finds its LIDs again and a fabric moving from OpenSM keeps its addresses.

use std::collections::BTreeMap;

use fabric_topology::{fmt_guid, parse_guid, EndPortId, Fabric, Guid, Lid, SwitchId};

/// Highest unicast LID of InfiniBand (`0xC000..=0xFFFE` are multicast, `0xFFFF` permissive).
pub const IB_MAX_UNICAST_LID: Lid = 0xBFFF;

/// Errors of LID assignment and of the `guid2lid` reader.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LidError {
    #[error(
        "fabric needs LIDs up to {needed} (LMC {lmc}) but the address space ends at {max}{}",
        match *.lmc { 0 => "", 1 => "; try LMC 0 (one LID per end port)", _ => "; try a smaller LMC (LMC 0: one LID per end port)" }
    )]
    /// The fabric needs more LIDs than the address space has.
    AddressSpaceExhausted { needed: u64, max: Lid, lmc: u8 },
    #[error("unsupported LMC {0} (InfiniBand allows 0..=7)")]
    /// LMC above 7 (IBA PortInfo:LMC is 3 bits).
    UnsupportedLmc(u8),
    #[error("invalid highest LID {0} (must be at least 1)")]
    /// The highest LID is 0.
    InvalidMaxLid(Lid),
    #[error("{file}:{line}: {message}")]
    /// A malformed `guid2lid` record (file name, 1-based line, what).
    Parse { file: String, line: usize, message: String },
}

/// Address assignment of one fabric. Index vectors are by dense id; `0` means "no LID".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LidPlan {
    /// LMC: `2^lmc` LIDs per end port (0..=7); with LMC ≥ 1 the last one is the escape LID.
    pub lmc: u8,
    /// Highest usable unicast address (InfiniBand: 0xBFFF).
    pub max_lid: Lid,
    /// Per switch: its LID.
    pub switch_lid: Vec<Lid>,
    /// Per end port: its base LID, aligned to `2^lmc` (escape LID = base + `2^lmc − 1` when
    /// `lmc ≥ 1`).
    pub end_port_base: Vec<Lid>,
}

/// A LID plan made for another fabric: its switch and end-port counts differ from the fabric's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("LID plan covers {plan_switches} switches and {plan_end_ports} end ports but the fabric has {switches} and {end_ports}")]
pub struct PlanMismatch {
    pub plan_switches: usize,
    pub plan_end_ports: usize,
    pub switches: usize,
    pub end_ports: usize,
}

impl LidPlan {
    /// Checks that the plan was made for `fabric`: one LID per switch and one base LID per end
    /// port (the entry check of the engines and of every driver's `configure_lids`).
    pub fn check_covers(&self, fabric: &Fabric) -> Result<(), PlanMismatch> {
        let (switches, end_ports) = (fabric.num_switches(), fabric.num_end_ports());
        if self.switch_lid.len() != switches || self.end_port_base.len() != end_ports {
            return Err(PlanMismatch {
                plan_switches: self.switch_lid.len(),
                plan_end_ports: self.end_port_base.len(),
                switches,
                end_ports,
            });
        }
        Ok(())
    }

    /// Highest LID assigned (0 if none).
    pub fn top(&self) -> Lid {
        let e = self.end_port_base.iter().copied().max().unwrap_or(0);
        let e = if e > 0 { e + (1 << self.lmc) - 1 } else { 0 };
        e.max(self.switch_lid.iter().copied().max().unwrap_or(0))
    }
    /// Base LID of an end port (0: none).
    pub fn base_lid(&self, ep: EndPortId) -> Lid {
        self.end_port_base[ep.idx()]
    }
    /// Escape LID of an end port: its last offset, base + `2^lmc − 1` (`None` with LMC = 0).
    pub fn escape_lid(&self, ep: EndPortId) -> Option<Lid> {
        self.escape_offset().map(|o| self.end_port_base[ep.idx()] + o)
    }
    /// Offset of the escape LID from the base LID: `2^lmc − 1` (`None` with LMC 0).
    pub fn escape_offset(&self) -> Option<Lid> {
        (self.lmc >= 1).then(|| (1 << self.lmc) - 1)
    }
    /// Number of offsets carrying base-routing layers: `2^lmc − 1` with LMC ≥ 1 (the last
    /// offset is the escape), 1 with LMC 0. Offsets `0..layer_offsets()` are all "base" LIDs.
    pub fn layer_offsets(&self) -> Lid {
        if self.lmc == 0 {
            1
        } else {
            (1 << self.lmc) - 1
        }
    }
    /// LID of layer offset `layer` of an end port (`None` when `layer ≥ layer_offsets()` or
    /// the end port has no LID).
    pub fn layer_lid(&self, ep: EndPortId, layer: Lid) -> Option<Lid> {
        let b = self.end_port_base[ep.idx()];
        (b != 0 && layer < self.layer_offsets()).then_some(b + layer)
    }
    /// LID of a switch (0: none).
    pub fn switch_lid(&self, sw: SwitchId) -> Lid {
        self.switch_lid[sw.idx()]
    }
    /// Number of LIDs per end port (`2^lmc`).
    pub fn lids_per_end_port(&self) -> u32 {
        1 << self.lmc
    }
    /// What owns `lid`: an end port (with its offset from the base LID; the escape is the last
    /// offset) or a switch.
    /// Linear in the fabric size; build a [`LidOwners`] table for repeated look-ups.
    pub fn owner(&self, lid: Lid) -> Option<LidOwner> {
        LidOwners::new(self).get(lid)
    }
}

/// What a LID designates.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LidOwner {
    /// An end port; `path` is the offset from its base LID (`0..2^lmc`; the last one is the
    /// escape with LMC ≥ 1).
    EndPort {
        /// The end port.
        ep: EndPortId,
        /// Offset from its base LID.
        path: u8,
    },
    /// A switch (its port 0).
    Switch(SwitchId),
}

/// Reverse table of a [`LidPlan`]: LID → owner, dense over `0..=top`.
#[derive(Clone, Debug)]
pub struct LidOwners {
    owners: Vec<Option<LidOwner>>,
}

impl LidOwners {
    /// Builds the table of a plan.
    pub fn new(plan: &LidPlan) -> Self {
        let mut owners = vec![None; plan.top() as usize + 1];
        for (i, &base) in plan.end_port_base.iter().enumerate() {
            if base == 0 {
                continue;
            }
            for path in 0..plan.lids_per_end_port() {
                owners[(base + path) as usize] = Some(LidOwner::EndPort {
                    ep: EndPortId(i as u32),
                    path: path as u8,
                });
            }
        }
        for (i, &lid) in plan.switch_lid.iter().enumerate() {
            if lid != 0 {
                owners[lid as usize] = Some(LidOwner::Switch(SwitchId(i as u32)));
            }
        }
        LidOwners { owners }
    }
    /// Owner of a LID (`None`: unassigned or beyond the plan).
    pub fn get(&self, lid: Lid) -> Option<LidOwner> {
        self.owners.get(lid as usize).copied().flatten()
    }
}

/// A recorded LID assignment, keyed by GUID: port GUID for end ports, node GUID for switches
/// (a switch's port 0 GUID), each with its LID range `(min, max)`.
///
/// Text form: OpenSM's `guid2lid` file, one record per line, `0x%016x 0x%04x 0x%04x`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guid2Lid {
    entries: BTreeMap<Guid, (Lid, Lid)>,
}

impl Guid2Lid {
    /// An empty record (a fabric seen for the first time).
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of GUIDs recorded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The recorded `(min, max)` LIDs of a GUID.
    pub fn get(&self, guid: Guid) -> Option<(Lid, Lid)> {
        self.entries.get(&guid).copied()
    }
    /// Records (or replaces) the range of a GUID.
    pub fn insert(&mut self, guid: Guid, min: Lid, max: Lid) {
        self.entries.insert(guid, (min, max));
    }
    /// Records in ascending GUID order.
    pub fn iter(&self) -> impl Iterator<Item = (Guid, Lid, Lid)> + '_ {
        self.entries.iter().map(|(&g, &(a, b))| (g, a, b))
    }

    /// Parses a `guid2lid` file. `source` names it in errors (`source:line: message`).
    /// Blank lines and `#` comments are ignored; numbers are `0x` hex or decimal. A GUID recorded
    /// twice, or a LID recorded for two GUIDs, is an error (silently keeping one of them would
    /// move the other's address). Whether the LIDs fit an address space is for the user of the
    /// record to check ([`Guid2Lid::above`]).
    pub fn parse(text: &str, source: &str) -> Result<Self, LidError> {
        let err = |line: usize, message: String| LidError::Parse {
            file: source.to_string(),
            line,
            message,
        };
        let mut entries = BTreeMap::new();
        // LID -> (line, GUID) of the record that holds it: two records may not share a LID.
        let mut holder: std::collections::HashMap<Lid, (usize, Guid)> = std::collections::HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            if fields.len() != 3 {
                return Err(err(
                    line,
                    format!("expected `GUID MIN_LID MAX_LID`, found {} fields", fields.len()),
                ));
            }
            let guid = parse_guid(fields[0]).ok_or_else(|| err(line, format!("bad GUID `{}`", fields[0])))?;
            let min = parse_lid(fields[1]).ok_or_else(|| err(line, format!("bad LID `{}`", fields[1])))?;
            let max = parse_lid(fields[2]).ok_or_else(|| err(line, format!("bad LID `{}`", fields[2])))?;
            if min == 0 || min > max || max - min >= MAX_LIDS_PER_PORT {
                return Err(err(
                    line,
                    format!("bad LID range {min:#06x}..{max:#06x} for {}", fmt_guid(guid)),
                ));
            }
            if entries.insert(guid, (min, max)).is_some() {
                return Err(err(line, format!("duplicate GUID {}", fmt_guid(guid))));
            }
            for lid in min..=max {
                if let Some((l, g)) = holder.insert(lid, (line, guid)) {
                    return Err(err(
                        line,
                        format!(
                            "LID {lid:#06x} of {} is already recorded for {} on line {l}",
                            fmt_guid(guid),
                            fmt_guid(g)
                        ),
                    ));
                }
            }
        }
        Ok(Guid2Lid { entries })
    }

    /// The records with a LID above `max_lid` (GUID, min, max), in ascending GUID order: LID
    /// assignment cannot keep them.
    pub fn above(&self, max_lid: Lid) -> Vec<(Guid, Lid, Lid)> {
        self.iter().filter(|&(_, _, hi)| hi > max_lid).collect()
    }

    /// Writes the `guid2lid` text (ascending GUID order).
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(self.entries.len() * 34);
        for (&g, &(a, b)) in &self.entries {
            s.push_str(&format!("0x{g:016x} {a:#06x} {b:#06x}\n"));
        }
        s
    }

    /// The assignment of a plan: every end port with a LID (port GUID → base..base+2^lmc-1) and
    /// every switch with a LID (node GUID → lid..lid).
    pub fn from_plan(f: &Fabric, p: &LidPlan) -> Self {
        let mut entries = BTreeMap::new();
        for (i, ep) in f.end_ports().iter().enumerate() {
            let base = p.end_port_base.get(i).copied().unwrap_or(0);
            if base != 0 {
                entries.insert(ep.port_guid, (base, base + p.lids_per_end_port() - 1));
            }
        }
        for (i, sw) in f.switches().iter().enumerate() {
            let lid = p.switch_lid.get(i).copied().unwrap_or(0);
            if lid != 0 {
                entries.entry(sw.guid).or_insert((lid, lid));
            }
        }
        Guid2Lid { entries }
    }

    /// [`Guid2Lid::from_plan`] plus the entries of `previous` whose GUIDs are not in the fabric
    /// (the LIDs that [`assign_lids`] kept reserved for them). Persist this to keep vanished
    /// ports' LIDs reserved across restarts.
    pub fn from_plan_keeping(f: &Fabric, p: &LidPlan, previous: &Guid2Lid) -> Self {
        let mut out = Self::from_plan(f, p);
        for (&g, &r) in &previous.entries {
            if f.end_port_by_guid(g).is_none() && f.switch_by_guid(g).is_none() {
                out.entries.entry(g).or_insert(r);
            }
        }
        out
    }
}

fn parse_lid(s: &str) -> Option<Lid> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Lid::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Taken LIDs. A hash set rather than a bitset: previous records may name LIDs anywhere in a
/// large out-of-band address space.
struct Taken {
    set: std::collections::HashSet<u64>,
}

impl Taken {
    fn get(&self, lid: u64) -> bool {
        self.set.contains(&lid)
    }
    fn set(&mut self, lid: u64) {
        self.set.insert(lid);
    }
}

/// Widest LID range of one record: `2^LMC` LIDs with InfiniBand's largest LMC, 7.
pub const MAX_LIDS_PER_PORT: Lid = 128;

/// Assigns LIDs to every end port and switch of the fabric (live or not: a LID belongs to a
/// GUID, not to a state).
///
/// * Each end port gets `2^lmc` consecutive LIDs starting at a multiple of `2^lmc` (LMC 1: the
///   pair `(2k, 2k+1)`, base and escape; LMC 0: one LID). Each switch gets one LID.
/// * Previous LIDs are kept for known GUIDs when they are usable (the whole aligned range in
///   `1..=max_lid`, none of it claimed by an earlier GUID: end ports in end-port order first,
///   then switches). A narrower record starting at an aligned LID (e.g. an LMC-0 record
///   `(2k, 2k)` under LMC 1) is widened when the rest of the range is free; a wider one (from a
///   larger LMC) keeps its aligned start.
/// * LIDs of `previous` GUIDs absent from the fabric stay reserved.
/// * New end ports get the lowest free aligned range, in end-port order; then new switches get
///   the lowest free LID each.
///
/// Deterministic: same fabric and same `previous` give the same plan.
pub fn assign_lids(fabric: &Fabric, previous: &Guid2Lid, lmc: u8, max_lid: Lid) -> Result<LidPlan, LidError> {
    if lmc > 7 {
        return Err(LidError::UnsupportedLmc(lmc));
    }
    if max_lid == 0 {
        return Err(LidError::InvalidMaxLid(max_lid));
    }
    let max = u64::from(max_lid);
    let span: u64 = 1 << lmc;
    let mut taken = Taken {
        set: std::collections::HashSet::with_capacity(span as usize * fabric.num_end_ports() + fabric.num_switches()),
    };
    taken.set(0);
    let free = |taken: &Taken, lo: u64| (lo..lo + span).all(|l| !taken.get(l));
    let mut end_port_base = vec![0 as Lid; fabric.num_end_ports()];
    let mut switch_lid = vec![0 as Lid; fabric.num_switches()];

    // 1. Keep usable previous LIDs of GUIDs present in the fabric.
    for (i, ep) in fabric.end_ports().iter().enumerate() {
        let Some((lo, hi)) = previous.get(ep.port_guid) else {
            continue;
        };
        let (lo, hi) = (u64::from(lo), u64::from(hi));
        let keep = lo >= 1 && lo % span == 0 && lo + span - 1 <= max && hi >= lo && free(&taken, lo);
        if keep {
            for l in lo..lo + span {
                taken.set(l);
            }
            end_port_base[i] = lo as Lid;
        }
    }
    for (i, sw) in fabric.switches().iter().enumerate() {
        if fabric.end_port_by_guid(sw.guid).is_some() {
            // A GUID used by both an end port and a switch: the end port owns the record.
            continue;
        }
        let Some((lo, _)) = previous.get(sw.guid) else { continue };
        let lo = u64::from(lo);
        if lo >= 1 && lo <= max && !taken.get(lo) {
            taken.set(lo);
            switch_lid[i] = lo as Lid;
        }
    }
    // 2. Reserve the LIDs of vanished GUIDs.
    for (g, lo, hi) in previous.iter() {
        if fabric.end_port_by_guid(g).is_some() || fabric.switch_by_guid(g).is_some() {
            continue;
        }
        let hi = u64::from(hi)
            .min(u64::from(lo) + u64::from(MAX_LIDS_PER_PORT) - 1)
            .min(max);
        for l in u64::from(lo)..=hi {
            taken.set(l);
        }
    }
    // 3. New end ports: lowest free aligned range, in end-port order.
    let mut top: u64 = 0;
    let mut cursor: u64 = span;
    for base in &mut end_port_base {
        if *base != 0 {
            continue;
        }
        while !free(&taken, cursor) {
            cursor += span;
        }
        for l in cursor..cursor + span {
            taken.set(l);
        }
        top = top.max(cursor + span - 1);
        *base = cursor.min(u64::from(Lid::MAX)) as Lid;
        cursor += span;
    }
    // 4. New switches: lowest free LID.
    let mut cursor: u64 = 1;
    for lid in &mut switch_lid {
        if *lid != 0 {
            continue;
        }
        while taken.get(cursor) {
            cursor += 1;
        }
        taken.set(cursor);
        top = top.max(cursor);
        *lid = cursor.min(u64::from(Lid::MAX)) as Lid;
        cursor += 1;
    }
    if top > max {
        return Err(LidError::AddressSpaceExhausted {
            needed: top,
            max: max_lid,
            lmc,
        });
    }
    Ok(LidPlan {
        lmc,
        max_lid,
        switch_lid,
        end_port_base,
    })
}

#[cfg(test)]
#[path = "lid_lmc_tests.rs"]
mod lmc_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_topology::{FabricBuilder, NodeType};

    /// `nsw` switches in a chain, `neps` end ports spread over them (GUIDs 0x2000 + i); also
    /// the fabric of the LMC ≥ 2 tests.
    pub(super) fn fabric(nsw: u32, neps: u32) -> Fabric {
        let mut b = FabricBuilder::new();
        let sws: Vec<SwitchId> = (0..nsw)
            .map(|i| b.add_switch(0x1000 + u64::from(i), format!("sw{i}"), 64).unwrap())
            .collect();
        for i in 1..nsw as usize {
            b.connect_switches(sws[i - 1], 64, sws[i], 63).unwrap();
        }
        for e in 0..neps {
            let ep = b
                .add_end_port(
                    0x2000 + u64::from(e),
                    0x3000 + u64::from(e),
                    format!("n{e}"),
                    1,
                    1,
                    NodeType::Compute,
                )
                .unwrap();
            b.connect_end_port(ep, sws[(e % nsw) as usize], 1 + (e / nsw) as u8)
                .unwrap();
        }
        b.build()
    }

    fn check_plan(f: &Fabric, p: &LidPlan) {
        // Every LID is unique, in range, and pairs are aligned.
        let mut seen = std::collections::HashSet::new();
        for &b in &p.end_port_base {
            assert!(b >= 1 && b + p.lids_per_end_port() - 1 <= p.max_lid);
            assert_eq!(b % p.lids_per_end_port(), 0, "base LID {b} not aligned");
            for k in 0..p.lids_per_end_port() {
                assert!(seen.insert(b + k), "LID {} assigned twice", b + k);
            }
        }
        for &l in &p.switch_lid {
            assert!(l >= 1 && l <= p.max_lid);
            assert!(seen.insert(l), "LID {l} assigned twice");
        }
        assert_eq!(p.end_port_base.len(), f.num_end_ports());
        assert_eq!(p.switch_lid.len(), f.num_switches());
    }

    #[test]
    fn a_plan_covers_only_the_fabric_it_was_made_for() {
        let f = fabric(3, 7);
        let p = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        assert_eq!(p.check_covers(&f), Ok(()));
        let other = fabric(3, 8);
        let e = p.check_covers(&other).unwrap_err();
        assert_eq!(
            e.to_string(),
            "LID plan covers 3 switches and 7 end ports but the fabric has 3 and 8"
        );
        assert!(p.check_covers(&fabric(2, 7)).is_err());
    }

    #[test]
    fn fresh_assignment_is_in_end_port_order_then_switches() {
        let f = fabric(3, 5);
        let p = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        check_plan(&f, &p);
        assert_eq!(p.end_port_base, vec![2, 4, 6, 8, 10]);
        // LID 1 is the lowest free single LID, then after the pairs.
        assert_eq!(p.switch_lid, vec![1, 12, 13]);
        assert_eq!(p.top(), 13);
        assert_eq!(p.escape_lid(EndPortId(1)), Some(5));
        let p0 = assign_lids(&f, &Guid2Lid::default(), 0, IB_MAX_UNICAST_LID).unwrap();
        check_plan(&f, &p0);
        assert_eq!(p0.end_port_base, vec![1, 2, 3, 4, 5]);
        assert_eq!(p0.switch_lid, vec![6, 7, 8]);
        assert_eq!(p0.escape_lid(EndPortId(0)), None);
    }

    #[test]
    fn previous_lids_are_kept_and_vanished_ones_reserved() {
        let f = fabric(2, 4);
        let mut prev = Guid2Lid::new();
        prev.insert(0x2001, 0x40, 0x41); // end port 1 keeps 0x40
        prev.insert(0x1001, 0x3, 0x3); // switch 1 keeps 3
        prev.insert(0xdead, 0x2, 0x3); // vanished: 2 and 3 reserved (3 is the switch's anyway)
        prev.insert(0xbeef, 0x4, 0x5); // vanished
        let p = assign_lids(&f, &prev, 1, IB_MAX_UNICAST_LID).unwrap();
        check_plan(&f, &p);
        assert_eq!(p.end_port_base, vec![6, 0x40, 8, 10]);
        assert_eq!(p.switch_lid, vec![1, 3]);
        // Round trip: the plan's own record reproduces the plan.
        let again = assign_lids(&f, &Guid2Lid::from_plan(&f, &p), 1, IB_MAX_UNICAST_LID).unwrap();
        assert_eq!(again, p);
        let kept = Guid2Lid::from_plan_keeping(&f, &p, &prev);
        assert_eq!(kept.get(0xbeef), Some((4, 5)));
        assert_eq!(kept.len(), 4 + 2 + 2);
    }

    #[test]
    fn unusable_previous_records_are_reassigned() {
        let f = fabric(1, 3);
        let mut prev = Guid2Lid::new();
        prev.insert(0x2000, 0x11, 0x12); // misaligned for LMC 1
        prev.insert(0x2001, 0xC010, 0xC011); // beyond max
        prev.insert(0x2002, 0x20, 0x20); // LMC-0 record: widened to the pair
        prev.insert(0x1000, 0x21, 0x21); // switch claims 0x21 first? no: end ports first
        let p = assign_lids(&f, &prev, 1, IB_MAX_UNICAST_LID).unwrap();
        check_plan(&f, &p);
        assert_eq!(p.end_port_base, vec![2, 4, 0x20]);
        assert_eq!(p.switch_lid, vec![1]);
    }

    #[test]
    fn stable_across_faults() {
        let f = fabric(3, 9);
        let p = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let g = f.apply(&[fabric_topology::FabricEvent::SwitchDown(0x1001)]).unwrap();
        let q = assign_lids(&g, &Guid2Lid::from_plan(&f, &p), 1, IB_MAX_UNICAST_LID).unwrap();
        assert_eq!(p, q);
    }

    #[test]
    fn too_big_fabric_is_refused_with_a_clear_error() {
        let f = fabric(2, 10);
        // LMC 1 needs 2..=21 for end ports, 1 and 22 for switches.
        let e = assign_lids(&f, &Guid2Lid::default(), 1, 21).unwrap_err();
        assert_eq!(
            e,
            LidError::AddressSpaceExhausted {
                needed: 22,
                max: 21,
                lmc: 1
            }
        );
        assert!(e.to_string().contains("try LMC 0"), "{e}");
        assert!(assign_lids(&f, &Guid2Lid::default(), 1, 22).is_ok());
        let p0 = assign_lids(&f, &Guid2Lid::default(), 0, 12).unwrap();
        check_plan(&f, &p0);
        assert_eq!(
            assign_lids(&f, &Guid2Lid::default(), 8, 100),
            Err(LidError::UnsupportedLmc(8))
        );
        // Out-of-band fabrics may use more than 16 bits, and old records anywhere in that space
        // cost nothing (no dense table).
        let p = assign_lids(&f, &Guid2Lid::default(), 1, 1 << 20).unwrap();
        assert_eq!(p.max_lid, 1 << 20);
        let mut far = Guid2Lid::new();
        far.insert(0x2000, 0xFFFF_FF00, 0xFFFF_FF01);
        far.insert(0xdead, 0xFFFF_0000, 0xFFFF_FFFF);
        let p = assign_lids(&f, &far, 1, u32::MAX).unwrap();
        assert_eq!(p.end_port_base[0], 0xFFFF_FF00);
        assert_eq!(p.end_port_base[1], 2);
    }

    #[test]
    fn guid2lid_text_round_trip_and_errors() {
        let text = "0x0002c90300000001 0x0002 0x0003\n# comment\n\n0x0000000000001000 0x0001 0x0001\n";
        let g = Guid2Lid::parse(text, "guid2lid").unwrap();
        assert_eq!(g.get(0x0002c90300000001), Some((2, 3)));
        assert_eq!(g.get(0x1000), Some((1, 1)));
        assert_eq!(
            g.to_text(),
            "0x0000000000001000 0x0001 0x0001\n0x0002c90300000001 0x0002 0x0003\n"
        );
        assert_eq!(Guid2Lid::parse(&g.to_text(), "x").unwrap(), g);
        let e = Guid2Lid::parse("0x1 0x2\n", "f").unwrap_err();
        assert_eq!(e.to_string(), "f:1: expected `GUID MIN_LID MAX_LID`, found 2 fields");
        let e = Guid2Lid::parse("0x1 2 3\n0x1 4 5\n", "f").unwrap_err();
        assert_eq!(e.to_string(), "f:2: duplicate GUID 0x0000000000000001");
        let e = Guid2Lid::parse("zz 2 3\n", "f").unwrap_err();
        assert!(matches!(e, LidError::Parse { line: 1, .. }));
        let e = Guid2Lid::parse("0x1 5 3\n", "f").unwrap_err();
        assert!(e.to_string().contains("bad LID range"), "{e}");
        let e = Guid2Lid::parse("0x1 0x2 0xffff\n", "f").unwrap_err();
        assert!(e.to_string().contains("bad LID range"), "{e}");
        // A LID recorded for two GUIDs names both lines and GUIDs (nothing is dropped silently).
        let e = Guid2Lid::parse(
            "0x1 0x2 0x3
# c
0x9 0x3 0x3
",
            "f",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "f:3: LID 0x0003 of 0x0000000000000009 is already recorded for 0x0000000000000001 on line 1"
        );
        // Records above an address space are listed for the caller to report.
        let g = Guid2Lid::parse(
            "0x1 0x2 0x3
0x9 0xc000 0xc001
",
            "f",
        )
        .unwrap();
        assert_eq!(g.above(IB_MAX_UNICAST_LID), vec![(9, 0xc000, 0xc001)]);
        assert!(g.above(0xFFFF).is_empty());
        // Wide LIDs (out-of-band fabrics) are written with more digits and read back.
        let mut w = Guid2Lid::new();
        w.insert(7, 0x12344, 0x12345);
        assert_eq!(Guid2Lid::parse(&w.to_text(), "w").unwrap(), w);
    }

    #[test]
    fn owners_table() {
        let f = fabric(2, 3);
        let p = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let o = LidOwners::new(&p);
        assert_eq!(
            o.get(4),
            Some(LidOwner::EndPort {
                ep: EndPortId(1),
                path: 0
            })
        );
        assert_eq!(
            o.get(5),
            Some(LidOwner::EndPort {
                ep: EndPortId(1),
                path: 1
            })
        );
        assert_eq!(o.get(1), Some(LidOwner::Switch(SwitchId(0))));
        assert_eq!(o.get(0), None);
        assert_eq!(o.get(1000), None);
    }
}
