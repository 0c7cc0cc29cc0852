//! The independent checks of the multicast forwarding tables read back from the switches:
//! one loop-free up*-down* tree per MLID over live cables spanning exactly the receivers
//! ([`check_tree`]), a flood through the tables ([`flood`], [`check_delivery`]), and the same
//! tables as fabricd reports them ([`same_as_daemon`]). Unit-tested below on hand-made tables.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use fabric_proto::v1 as pb;
use fabric_topology::{EndPortId, Fabric, Guid, Remote, SwitchId};

use super::{Dead, Mft};

/// Switch levels of the complete fabric: 0 for switches with CAs, else the hop distance to
/// the nearest of them.
pub fn levels(f: &Fabric) -> HashMap<SwitchId, u32> {
    let mut lv: HashMap<SwitchId, u32> = HashMap::new();
    let mut q = VecDeque::new();
    for s in f.switch_ids() {
        if f.switch(s).ports.iter().any(|p| matches!(p.remote, Remote::EndPort(_))) {
            lv.insert(s, 0);
            q.push_back(s);
        }
    }
    while let Some(s) = q.pop_front() {
        for (_, p) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, .. } = p.remote {
                if !lv.contains_key(&sw) {
                    lv.insert(sw, lv[&s] + 1);
                    q.push_back(sw);
                }
            }
        }
    }
    lv
}

/// What a multicast tree checked by [`check_tree`] looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeShape {
    /// Switches in the tree by level (leaves first).
    pub per_level: Vec<usize>,
    pub switches: usize,
    pub links: usize,
    /// The switch no tree link goes up from (the root), by GUID.
    pub root: Guid,
}

/// Checks that the MFT entries of `mlid` form one loop-free tree over live cables spanning
/// exactly `receivers` (port GUIDs):
///
/// * a receiver's CA port has the bit on its leaf, no other CA port has it, no switch port 0;
/// * every switch-to-switch bit is over a live cable whose other end has the bit toward it
///   (no half link: the groups here have receivers only) and parallel cables are not both used;
/// * the switches with an entry and these links are connected and have one link fewer than
///   switches (a tree), every switch has at most one link to a higher level and none to its
///   own level (so every path through it is up*-down*).
pub fn check_tree(
    f: &Fabric,
    mfts: &HashMap<Guid, Mft>,
    mlid: u64,
    receivers: &BTreeSet<Guid>,
    dead: &Dead,
    level: &HashMap<SwitchId, u32>,
) -> Result<TreeShape, String> {
    let mut errors = Vec::new();
    let mask = |s: SwitchId| -> &[u32] {
        mfts.get(&f.switch(s).guid)
            .and_then(|m| m.get(&mlid))
            .map_or(&[], Vec::as_slice)
    };
    let in_tree: Vec<SwitchId> = f.switch_ids().filter(|&s| !mask(s).is_empty()).collect();
    let mut links: BTreeSet<(SwitchId, SwitchId, u8, u8)> = BTreeSet::new();
    let mut seen_receivers = BTreeSet::new();
    for &s in &in_tree {
        let g = f.switch(s).guid;
        for &p in mask(s) {
            let Ok(p) = u8::try_from(p) else {
                errors.push(format!("switch 0x{g:016x}: port {p} in the mask of {mlid:#x}"));
                continue;
            };
            if p == 0 {
                errors.push(format!("switch 0x{g:016x} is a member of {mlid:#x} (port 0 set)"));
                continue;
            }
            match f.switch(s).ports.get(usize::from(p)).map(|x| x.remote) {
                Some(Remote::EndPort(e)) => {
                    let pg = f.end_port(e).port_guid;
                    if dead.contains(&(g, p)) {
                        errors.push(format!(
                            "{mlid:#x}: switch 0x{g:016x} port {p} to CA 0x{pg:016x} is down"
                        ));
                    }
                    if receivers.contains(&pg) {
                        seen_receivers.insert(pg);
                    } else {
                        errors.push(format!(
                            "{mlid:#x}: CA port 0x{pg:016x} (switch 0x{g:016x} port {p}) is not a receiving member"
                        ));
                    }
                }
                Some(Remote::Switch { sw: t, port: q }) => {
                    let tg = f.switch(t).guid;
                    if dead.contains(&(g, p)) || dead.contains(&(tg, q)) {
                        errors.push(format!(
                            "{mlid:#x}: switch 0x{g:016x} port {p} leads into an unlinked cable"
                        ));
                    } else if !mask(t).contains(&u32::from(q)) {
                        errors.push(format!(
                            "{mlid:#x}: half link: switch 0x{g:016x} port {p} forwards to 0x{tg:016x} port {q}, which does not forward back"
                        ));
                    } else {
                        let key = if s <= t { (s, t, p, q) } else { (t, s, q, p) };
                        links.insert(key);
                    }
                }
                _ => errors.push(format!("{mlid:#x}: switch 0x{g:016x} port {p} is not cabled")),
            }
        }
    }
    for r in receivers.difference(&seen_receivers) {
        errors.push(format!("{mlid:#x}: receiving member 0x{r:016x} has no bit on its leaf"));
    }
    // Parallel cables between the same switches used twice: a loop of two links.
    let mut pairs: BTreeMap<(SwitchId, SwitchId), usize> = BTreeMap::new();
    for &(a, b, _, _) in &links {
        *pairs.entry((a, b)).or_default() += 1;
    }
    for ((a, b), n) in &pairs {
        if *n > 1 {
            errors.push(format!(
                "{mlid:#x}: {n} parallel cables between 0x{:016x} and 0x{:016x} in the tree (a loop)",
                f.switch(*a).guid,
                f.switch(*b).guid
            ));
        }
    }
    if !in_tree.is_empty() && links.len() + 1 != in_tree.len() {
        errors.push(format!(
            "{mlid:#x}: {} switches and {} links: not a tree",
            in_tree.len(),
            links.len()
        ));
    }
    // Connected.
    let mut adj: HashMap<SwitchId, Vec<SwitchId>> = HashMap::new();
    for &(a, b, _, _) in &links {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default().push(a);
    }
    if let Some(&first) = in_tree.first() {
        let mut seen = BTreeSet::from([first]);
        let mut q = VecDeque::from([first]);
        while let Some(s) = q.pop_front() {
            for &t in adj.get(&s).into_iter().flatten() {
                if seen.insert(t) {
                    q.push_back(t);
                }
            }
        }
        if seen.len() != in_tree.len() {
            errors.push(format!(
                "{mlid:#x}: the tree falls apart: {} of {} switches connected",
                seen.len(),
                in_tree.len()
            ));
        }
    }
    // Up*-down*: at most one link up per switch, none sideways.
    let mut roots = Vec::new();
    for &s in &in_tree {
        let up = adj
            .get(&s)
            .into_iter()
            .flatten()
            .filter(|t| level[t] > level[&s])
            .count();
        if adj.get(&s).into_iter().flatten().any(|t| level[t] == level[&s]) {
            errors.push(format!(
                "{mlid:#x}: switch 0x{:016x} has a tree link within its level",
                f.switch(s).guid
            ));
        }
        match up {
            0 => roots.push(s),
            1 => {}
            n => errors.push(format!(
                "{mlid:#x}: switch 0x{:016x} has {n} tree links up (a path through it goes down then up)",
                f.switch(s).guid
            )),
        }
    }
    if errors.is_empty() {
        let root = match roots.as_slice() {
            [r] => f.switch(*r).guid,
            [] => 0,
            _ => return Err(format!("{mlid:#x}: {} switches without a link up", roots.len())),
        };
        let mut per_level = Vec::new();
        for s in &in_tree {
            let l = level[s] as usize;
            if per_level.len() <= l {
                per_level.resize(l + 1, 0);
            }
            per_level[l] += 1;
        }
        Ok(TreeShape {
            per_level,
            switches: in_tree.len(),
            links: links.len(),
            root,
        })
    } else {
        errors.truncate(20);
        Err(errors.join("\n"))
    }
}

/// Floods a packet of `mlid` sent by end port `src` through the installed tables (a copy out
/// of every mask port but the arrival one; unlinked cables drop it): how many copies each CA
/// port (by port GUID) gets, or the switch reached twice (a loop or a second path).
pub fn flood(
    f: &Fabric,
    mfts: &HashMap<Guid, Mft>,
    mlid: u64,
    src: EndPortId,
    dead: &Dead,
) -> Result<BTreeMap<Guid, usize>, String> {
    let (leaf, port) = f.end_port(src).attach.ok_or("source not cabled")?;
    let mut got = BTreeMap::new();
    let mut visited = BTreeSet::new();
    let mut q = VecDeque::from([(leaf, port)]);
    while let Some((s, inp)) = q.pop_front() {
        let g = f.switch(s).guid;
        if !visited.insert(s) {
            return Err(format!(
                "{mlid:#x} from 0x{:016x}: switch 0x{g:016x} reached twice",
                f.end_port(src).port_guid
            ));
        }
        let ports = mfts.get(&g).and_then(|m| m.get(&mlid)).cloned().unwrap_or_default();
        for p in ports {
            let Ok(p) = u8::try_from(p) else { continue };
            if p == inp || p == 0 || dead.contains(&(g, p)) {
                continue;
            }
            match f.switch(s).ports.get(usize::from(p)).map(|x| x.remote) {
                Some(Remote::EndPort(e)) => *got.entry(f.end_port(e).port_guid).or_insert(0) += 1,
                Some(Remote::Switch { sw, port: q2 }) if !dead.contains(&(f.switch(sw).guid, q2)) => {
                    q.push_back((sw, q2));
                }
                _ => {}
            }
        }
    }
    Ok(got)
}

/// [`flood`] from every receiver: each other receiver gets exactly one copy, nobody else any.
pub fn check_delivery(
    f: &Fabric,
    mfts: &HashMap<Guid, Mft>,
    mlid: u64,
    receivers: &BTreeSet<Guid>,
    dead: &Dead,
) -> Result<(), String> {
    for &r in receivers {
        let e = f
            .end_port_by_guid(r)
            .ok_or_else(|| format!("receiver 0x{r:016x} not in the fabric"))?;
        let got = flood(f, mfts, mlid, e, dead)?;
        for &o in receivers.iter().filter(|&&o| o != r) {
            let n = got.get(&o).copied().unwrap_or(0);
            if n != 1 {
                return Err(format!(
                    "{mlid:#x}: 0x{o:016x} gets {n} copies of a packet from 0x{r:016x}"
                ));
            }
        }
        if let Some((o, n)) = got.iter().find(|(o, _)| !receivers.contains(o) || **o == r) {
            return Err(format!(
                "{mlid:#x}: 0x{o:016x} (not another receiver) gets {n} copies from 0x{r:016x}"
            ));
        }
    }
    Ok(())
}

/// Every group's tree checked (`check_tree`) and flooded (`check_delivery`): (MLID, shape).
pub fn check_all(
    f: &Fabric,
    mfts: &HashMap<Guid, Mft>,
    want: &[(u16, BTreeSet<Guid>)],
    dead: &Dead,
    level: &HashMap<SwitchId, u32>,
) -> Result<Vec<(u16, TreeShape)>, String> {
    let mut out = Vec::new();
    for (mlid, receivers) in want {
        let shape = check_tree(f, mfts, u64::from(*mlid), receivers, dead, level)?;
        check_delivery(f, mfts, u64::from(*mlid), receivers, dead)?;
        out.push((*mlid, shape));
    }
    // No entry of another MLID anywhere.
    let known: BTreeSet<u64> = want.iter().map(|(m, _)| u64::from(*m)).collect();
    for (g, t) in mfts {
        if let Some(m) = t.keys().find(|m| !known.contains(m)) {
            return Err(format!("switch 0x{g:016x} has an entry for MLID {m:#x}, no such group"));
        }
    }
    Ok(out)
}

/// One line per tree: MLID, switches by level, links, root.
pub fn shapes_text(shapes: &[(u16, TreeShape)]) -> String {
    shapes
        .iter()
        .map(|(m, t)| {
            format!(
                "  MLID {m:#06x}: {} switches (by level from the leaves {:?}), {} links, root 0x{:016x}",
                t.switches, t.per_level, t.links, t.root
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The daemon's committed trees equal the tables read back from the switches.
pub fn same_as_daemon(g: &pb::ListMulticastGroupsResponse, mfts: &HashMap<Guid, Mft>) -> Result<(), String> {
    for grp in &g.groups {
        let Some(t) = &grp.tree else { continue };
        let daemon: BTreeMap<Guid, Vec<u32>> = t
            .switches
            .iter()
            .filter(|s| !s.ports.is_empty())
            .map(|s| (s.guid, s.ports.clone()))
            .collect();
        let read: BTreeMap<Guid, Vec<u32>> = mfts
            .iter()
            .filter_map(|(sw, m)| m.get(&u64::from(grp.mlid)).map(|p| (*sw, p.clone())))
            .collect();
        if daemon != read {
            return Err(format!(
                "MLID {:#x}: fabricd's tree {daemon:x?} but the switches hold {read:x?}",
                grp.mlid
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MLID: u64 = 0xc004;

    /// 4 leaves × 4 CAs, 2 spines.
    fn fabric() -> Fabric {
        fabric_topology::gen::generate_str("PGFT(2;4,4;1,2;1,1)", None).expect("generate")
    }

    /// Leaf of end port `e` and the port of the CA.
    fn at(f: &Fabric, e: u32) -> (SwitchId, u8) {
        f.end_port(EndPortId(e)).attach.expect("cabled")
    }

    /// The spines, in order.
    fn spines(f: &Fabric) -> Vec<SwitchId> {
        let lv = levels(f);
        f.switch_ids().filter(|s| lv[s] == 1).collect()
    }

    /// The port of switch `a` cabled to switch `b`.
    fn port_to(f: &Fabric, a: SwitchId, b: SwitchId) -> u8 {
        f.switch(a)
            .external_ports()
            .find_map(|(p, port)| matches!(port.remote, Remote::Switch { sw, .. } if sw == b).then_some(p))
            .expect("cabled")
    }

    /// MFTs from (switch, ports) entries of [`MLID`].
    fn mfts(f: &Fabric, entries: &[(SwitchId, Vec<u8>)]) -> HashMap<Guid, Mft> {
        let mut m: HashMap<Guid, Mft> = HashMap::new();
        for (s, ports) in entries {
            let e = m.entry(f.switch(*s).guid).or_default().entry(MLID).or_default();
            e.extend(ports.iter().map(|&p| u32::from(p)));
            e.sort_unstable();
        }
        m
    }

    fn receivers(f: &Fabric, eps: &[u32]) -> BTreeSet<Guid> {
        eps.iter().map(|&e| f.end_port(EndPortId(e)).port_guid).collect()
    }

    /// The tree leaf(0) – spine 0 – leaf(4) for CAs 0 and 4, plus `more` entries.
    fn tree(f: &Fabric, more: &[(SwitchId, Vec<u8>)]) -> HashMap<Guid, Mft> {
        let ((a, pa), (b, pb)) = (at(f, 0), at(f, 4));
        let s0 = spines(f)[0];
        let mut e = vec![
            (a, vec![pa, port_to(f, a, s0)]),
            (s0, vec![port_to(f, s0, a), port_to(f, s0, b)]),
            (b, vec![pb, port_to(f, b, s0)]),
        ];
        e.extend_from_slice(more);
        mfts(f, &e)
    }

    #[test]
    fn a_tree_spanning_the_receivers_passes_and_delivers_once() {
        let f = fabric();
        let lv = levels(&f);
        let r = receivers(&f, &[0, 4]);
        let m = tree(&f, &[]);
        let shape = check_tree(&f, &m, MLID, &r, &Dead::new(), &lv).expect("a tree");
        assert_eq!(
            (shape.switches, shape.links, shape.per_level.clone()),
            (3, 2, vec![2, 1])
        );
        assert_eq!(shape.root, f.switch(spines(&f)[0]).guid);
        check_delivery(&f, &m, MLID, &r, &Dead::new()).expect("each receiver once");
    }

    #[test]
    fn loops_half_links_strays_missing_members_and_dead_cables_are_caught() {
        let f = fabric();
        let lv = levels(&f);
        let none = Dead::new();
        let r = receivers(&f, &[0, 4]);
        let ((a, _), (b, _)) = (at(&f, 0), at(&f, 4));
        let (s0, s1) = (spines(&f)[0], spines(&f)[1]);
        let err = |m: &HashMap<Guid, Mft>, r: &BTreeSet<Guid>, dead: &Dead| {
            check_tree(&f, m, MLID, r, dead, &lv).expect_err("not a valid tree")
        };
        // A second path through spine 1: a loop.
        let looped = tree(
            &f,
            &[
                (a, vec![port_to(&f, a, s1)]),
                (s1, vec![port_to(&f, s1, a), port_to(&f, s1, b)]),
                (b, vec![port_to(&f, b, s1)]),
            ],
        );
        assert!(err(&looped, &r, &none).contains("not a tree"));
        assert!(check_delivery(&f, &looped, MLID, &r, &none)
            .unwrap_err()
            .contains("reached twice"));
        // Spine 0 does not forward back to leaf a: a half link.
        let mut half = tree(&f, &[]);
        half.get_mut(&f.switch(s0).guid)
            .expect("spine 0")
            .insert(MLID, vec![u32::from(port_to(&f, s0, b))]);
        assert!(err(&half, &r, &none).contains("half link"));
        // Another CA port of leaf a: not a member.
        let stray = tree(&f, &[(a, vec![at(&f, 1).1])]);
        assert!(err(&stray, &r, &none).contains("not a receiving member"));
        assert!(check_delivery(&f, &stray, MLID, &r, &none).is_err());
        // A receiver without its bit.
        let more = receivers(&f, &[0, 4, 8]);
        assert!(err(&tree(&f, &[]), &more, &none).contains("has no bit"));
        // Switch port 0, and a tree link over an unlinked cable.
        assert!(err(&tree(&f, &[(a, vec![0])]), &r, &none).contains("port 0"));
        let dead = Dead::from([(f.switch(a).guid, port_to(&f, a, s0))]);
        assert!(err(&tree(&f, &[]), &r, &dead).contains("unlinked cable"));
    }

    #[test]
    fn a_tree_going_down_then_up_again_is_not_up_down() {
        // CA 0's leaf a – spine 0 – leaf c – spine 1 – CA 4's leaf b: a tree that delivers
        // once, but leaf c has two links up (a path down to c and up again).
        let f = fabric();
        let lv = levels(&f);
        let r = receivers(&f, &[0, 4]);
        let ((a, pa), (b, pb), (c, _)) = (at(&f, 0), at(&f, 4), at(&f, 8));
        let (s0, s1) = (spines(&f)[0], spines(&f)[1]);
        let m = mfts(
            &f,
            &[
                (a, vec![pa, port_to(&f, a, s0)]),
                (s0, vec![port_to(&f, s0, a), port_to(&f, s0, c)]),
                (c, vec![port_to(&f, c, s0), port_to(&f, c, s1)]),
                (s1, vec![port_to(&f, s1, c), port_to(&f, s1, b)]),
                (b, vec![pb, port_to(&f, b, s1)]),
            ],
        );
        check_delivery(&f, &m, MLID, &r, &Dead::new()).expect("it delivers once");
        let e = check_tree(&f, &m, MLID, &r, &Dead::new(), &lv).expect_err("not up*-down*");
        assert!(e.contains("2 tree links up"), "{e}");
    }
}
