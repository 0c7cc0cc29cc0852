//! Structural recognition of a complete PGFT ([`PgftLayout::recognize_structure`]): from the
//! levels and the cabling alone, whatever the switch names, GUIDs and port numbers (a fabric
//! read from an `ibnetdiscover` dump, for instance).

use std::collections::HashMap;

use super::addr::SwitchAddr;
use super::error::GenError;
use super::layout::PgftLayout;
use super::spec::{PgftSpec, SpecKind};
use crate::model::{fmt_guid, Fabric, Remote, SwitchId};

impl PgftLayout {
    /// Recognizes a complete, live PGFT (thesis §1.3.3, Definition 25) from its structure:
    /// `level` gives every switch's level (the ranking's, leaves at 0). The vectors come from
    /// the port groups (`m_l`: children per level-`l` switch, `w_{l+1}`: parents, `p_l`: cables
    /// per child or parent), the digits from the tree: the leaves below a switch form its
    /// subtree (its m-digits); sibling subtrees are numbered by their smallest leaf GUID, the
    /// switches with the same children (w-siblings) by GUID, the end ports of a leaf by port
    /// number. End-node indices `d = Σ a_i·Π_{j<i} m_j` are then the topological NIDs of
    /// Dmodc's Alg. 7, and parents are numbered in their GUID order, which makes Dmodk's closed
    /// form equal to Dmodc on any complete PGFT. On a generated fabric the layout equals
    /// [`PgftLayout::recognize`]'s (its GUIDs follow the generator order).
    ///
    /// The recognised addresses are then checked against the PGFT cabling rule (every switch
    /// cabled to exactly the parents its address gives, with `p` cables each). Errors with
    /// [`GenError::NotRecognized`] naming the first irregularity: a dead switch, end port or
    /// cable, an unranked switch, a cable that skips a level, switches of one level with
    /// different port-group counts (a degraded fabric), a switch whose parents do not match
    /// its address (e.g. a quasi fat-tree's cross-connected groups), or counts that do not
    /// make a PGFT.
    pub fn recognize_structure(fabric: &Fabric, level: &[Option<u32>]) -> Result<PgftLayout, GenError> {
        let fail = GenError::NotRecognized;
        let n = fabric.num_switches();
        if n == 0 {
            return Err(fail("the fabric has no switches".into()));
        }
        let name = |s: SwitchId| {
            let sw = fabric.switch(s);
            format!("switch {} '{}'", fmt_guid(sw.guid), sw.desc)
        };
        let guid = |s: SwitchId| fabric.switch(s).guid;
        let mut lv = vec![0u32; n];
        for s in fabric.switch_ids() {
            let sw = fabric.switch(s);
            if !sw.up {
                return Err(fail(format!("{} is down", name(s))));
            }
            lv[s.idx()] = level
                .get(s.idx())
                .copied()
                .flatten()
                .ok_or_else(|| fail(format!("{} has no level in the ranking", name(s))))?;
            for (pn, p) in sw.external_ports() {
                match p.remote {
                    Remote::Switch { .. } if fabric.switch_link_live(s, pn).is_none() => {
                        return Err(fail(format!("{} port {pn}: the cable is down", name(s))));
                    }
                    Remote::EndPort(ep) if !fabric.end_port_live(ep) => {
                        return Err(fail(format!(
                            "{} port {pn}: end port {} is down",
                            name(s),
                            fmt_guid(fabric.end_port(ep).port_guid)
                        )));
                    }
                    _ => {}
                }
            }
        }
        for e in fabric.end_port_ids() {
            if !fabric.end_port_live(e) {
                return Err(fail(format!(
                    "end port {} is down or not cabled",
                    fmt_guid(fabric.end_port(e).port_guid)
                )));
            }
        }
        let h = lv.iter().copied().max().unwrap_or(0) as usize + 1;
        let mut by_level: Vec<Vec<SwitchId>> = vec![Vec::new(); h];
        for s in fabric.switch_ids() {
            by_level[lv[s.idx()] as usize].push(s);
            if (lv[s.idx()] == 0) != fabric.is_leaf(s) {
                return Err(fail(format!(
                    "{} is at level {} of the ranking {} end ports",
                    name(s),
                    lv[s.idx()],
                    if fabric.is_leaf(s) { "but has" } else { "and has no" }
                )));
            }
        }
        if by_level.iter().any(Vec::is_empty) {
            return Err(fail("the ranking leaves a level without switches".into()));
        }

        // Port-group counts, the same for every switch of a level.
        let mut m = vec![0u32; h];
        let mut w = vec![1u32; h];
        let mut p = vec![1u32; h];
        // (children, cables per child, parents, cables per parent) of the first switch of a level.
        let mut shape: Vec<Option<(SwitchId, [u32; 4])>> = vec![None; h];
        for s in fabric.switch_ids() {
            let l = lv[s.idx()];
            let mut c = [0u32; 4];
            for g in fabric.port_groups(s) {
                let rl = lv[g.remote.idx()];
                let k = g.ports.len() as u32;
                let (count, cables) = if rl + 1 == l {
                    (0, 1)
                } else if rl == l + 1 {
                    (2, 3)
                } else {
                    return Err(fail(format!(
                        "{} (level {l}) is cabled to {} (level {rl}): not adjacent levels",
                        name(s),
                        name(g.remote)
                    )));
                };
                if c[count] > 0 && c[cables] != k {
                    return Err(fail(format!(
                        "{} has {} cables to {} but {} to another switch of level {rl}",
                        name(s),
                        k,
                        name(g.remote),
                        c[cables]
                    )));
                }
                c[count] += 1;
                c[cables] = k;
            }
            if l == 0 {
                c[0] = fabric.attached_end_ports(s).len() as u32;
                c[1] = 1;
            }
            match shape[l as usize] {
                None => shape[l as usize] = Some((s, c)),
                Some((first, c0)) if c0 != c => {
                    let what = |c: [u32; 4]| {
                        format!(
                            "{} children ({} cables each) and {} parents ({} cables each)",
                            c[0], c[1], c[2], c[3]
                        )
                    };
                    return Err(fail(format!(
                        "{} has {}, {} of the same level {}",
                        name(s),
                        what(c),
                        name(first),
                        what(c0)
                    )));
                }
                Some(_) => {}
            }
        }
        for l in 0..h {
            let (s, c) = shape[l].expect("every level has a switch");
            m[l] = c[0];
            if l == 0 {
                p[0] = 1;
            } else {
                p[l] = c[1];
            }
            if l + 1 < h {
                if c[2] == 0 {
                    return Err(fail(format!("{} (level {l}) has no parent", name(s))));
                }
                w[l + 1] = c[2];
            } else if c[2] != 0 {
                return Err(fail(format!("{} is on the top level but has parents", name(s))));
            }
        }
        for l in 1..h {
            let (s, c) = shape[l - 1].expect("every level has a switch");
            if c[3] != p[l] {
                return Err(fail(format!(
                    "{} has {} cables to each parent, its parents {} to each child",
                    name(s),
                    c[3],
                    p[l]
                )));
            }
        }

        // Subtrees (the leaves below a switch) and w-digits, bottom-up. The w-digits of a
        // level-l switch are the common w-digits of its children, then its GUID rank among the
        // switches with the same children (its w-siblings). For the children of one switch to
        // have the same w-digits, every child subtree is first relabelled to agree with the
        // first one (by smallest leaf GUID) through the switches above both: a no-op when the
        // GUID order follows the PGFT addressing (generated fabrics and their dumps).
        let children_of = |s: SwitchId| -> Vec<SwitchId> {
            let l = lv[s.idx()];
            fabric
                .port_groups(s)
                .iter()
                .filter(|g| lv[g.remote.idx()] + 1 == l)
                .map(|g| g.remote)
                .collect()
        };
        let mut sub = vec![0u32; n];
        // Per level: the children subtrees of each subtree (sorted), its smallest leaf GUID and
        // its switches.
        let mut sub_children: Vec<Vec<Vec<u32>>> = vec![Vec::new(); h];
        let mut sub_min: Vec<Vec<u64>> = vec![Vec::new(); h];
        let mut members: Vec<Vec<Vec<SwitchId>>> = vec![Vec::new(); h];
        let mut wdigits: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, &s) in by_level[0].iter().enumerate() {
            sub[s.idx()] = i as u32;
            sub_children[0].push(Vec::new());
            sub_min[0].push(guid(s));
            members[0].push(vec![s]);
            wdigits[s.idx()] = vec![0];
        }
        for l in 1..h {
            let mut interned: HashMap<Vec<u32>, u32> = HashMap::new();
            let mut kids: Vec<Vec<SwitchId>> = Vec::with_capacity(by_level[l].len());
            for &s in &by_level[l] {
                let mut children = children_of(s);
                children.sort_by_key(|c| sub_min[l - 1][sub[c.idx()] as usize]);
                let subs: Vec<u32> = children.iter().map(|c| sub[c.idx()]).collect();
                let mut sorted = subs.clone();
                sorted.sort_unstable();
                if sorted.windows(2).any(|x| x[0] == x[1]) {
                    return Err(fail(format!(
                        "{} has two children above the same leaves: not a PGFT",
                        name(s)
                    )));
                }
                let next = interned.len() as u32;
                let id = *interned.entry(sorted.clone()).or_insert(next);
                if id == next {
                    let least = sorted.iter().map(|&c| sub_min[l - 1][c as usize]).min().unwrap_or(0);
                    sub_min[l].push(least);
                    sub_children[l].push(sorted);
                    members[l].push(Vec::new());
                }
                sub[s.idx()] = id;
                members[l][id as usize].push(s);
                kids.push(children);
            }
            // Relabelling of the child subtrees: old w-digits -> those of the aligned switch in
            // the first child subtree.
            let mut relabel: HashMap<u32, HashMap<Vec<u32>, Vec<u32>>> = HashMap::new();
            for children in &kids {
                let reference = &wdigits[children[0].idx()];
                for c in &children[1..] {
                    let map = relabel.entry(sub[c.idx()]).or_default();
                    let old = wdigits[c.idx()].clone();
                    match map.get(&old) {
                        Some(new) if new != reference => {
                            return Err(fail(format!(
                                "{} is cabled like two different switches of its subtree: not a PGFT",
                                name(*c)
                            )));
                        }
                        Some(_) => {}
                        None => {
                            map.insert(old, reference.clone());
                        }
                    }
                }
            }
            let mut order: Vec<u32> = relabel.keys().copied().collect();
            order.sort_unstable();
            for t in order {
                let map = &relabel[&t];
                if map.iter().all(|(a, b)| a == b) {
                    continue;
                }
                let mut stack: Vec<SwitchId> = Vec::new();
                let mut new = Vec::with_capacity(members[l - 1][t as usize].len());
                for &x in &members[l - 1][t as usize] {
                    let to = map
                        .get(&wdigits[x.idx()])
                        .ok_or_else(|| fail(format!("{} has no parent above its subtree's leaves", name(x))))?;
                    new.push((x, to.clone()));
                }
                for (x, to) in new {
                    wdigits[x.idx()] = to;
                    stack.push(x);
                }
                // Down the subtree: a child's w-digits are its parents' without the last one.
                while let Some(x) = stack.pop() {
                    let pre = wdigits[x.idx()][..wdigits[x.idx()].len() - 1].to_vec();
                    for y in children_of(x) {
                        if wdigits[y.idx()] != pre {
                            wdigits[y.idx()] = pre.clone();
                            stack.push(y);
                        }
                    }
                }
            }
            // w-digits of level l.
            let mut siblings: HashMap<Vec<u32>, Vec<SwitchId>> = HashMap::new();
            let mut sibling_keys: Vec<Vec<u32>> = Vec::new();
            for (i, &s) in by_level[l].iter().enumerate() {
                let children = &kids[i];
                let prefix = &wdigits[children[0].idx()];
                if let Some(c) = children.iter().find(|c| &wdigits[c.idx()] != prefix) {
                    return Err(fail(format!(
                        "the children {} and {} of {} have different parents",
                        name(children[0]),
                        name(*c),
                        name(s)
                    )));
                }
                let mut key: Vec<u32> = children.iter().map(|c| c.0).collect();
                key.sort_unstable();
                let e = siblings.entry(key.clone()).or_default();
                if e.is_empty() {
                    sibling_keys.push(key);
                }
                e.push(s);
            }
            for key in &sibling_keys {
                let mut sws = siblings[key].clone();
                if sws.len() != w[l] as usize {
                    return Err(fail(format!(
                        "{} switches of level {l} share the children of {}, its children have {} parents",
                        sws.len(),
                        name(sws[0]),
                        w[l]
                    )));
                }
                sws.sort_by_key(|&s| guid(s));
                let child = SwitchId(key[0]);
                for (b, &s) in sws.iter().enumerate() {
                    let mut d = wdigits[child.idx()].clone();
                    d.push(b as u32);
                    wdigits[s.idx()] = d;
                }
            }
        }
        if sub_children[h - 1].len() != 1 {
            return Err(fail(format!(
                "the top switches are above {} disjoint sets of leaves, not one tree",
                sub_children[h - 1].len()
            )));
        }
        // m-digit of every subtree within its parent subtree (by smallest leaf GUID), and parent.
        let mut digit: Vec<Vec<u32>> = (0..h).map(|l| vec![u32::MAX; sub_min[l].len()]).collect();
        let mut parent: Vec<Vec<u32>> = (0..h).map(|l| vec![u32::MAX; sub_min[l].len()]).collect();
        for l in 1..h {
            for (t, kids) in sub_children[l].iter().enumerate() {
                let mut kids = kids.clone();
                kids.sort_by_key(|&c| sub_min[l - 1][c as usize]);
                for (a, &c) in kids.iter().enumerate() {
                    if parent[l - 1][c as usize] != u32::MAX {
                        return Err(fail(format!(
                            "the leaves below some switch of level {} are below two different sets of level-{l} switches",
                            l - 1
                        )));
                    }
                    parent[l - 1][c as usize] = t as u32;
                    digit[l - 1][c as usize] = a as u32;
                }
            }
        }
        let mut switch_addr = Vec::with_capacity(n);
        for s in fabric.switch_ids() {
            let l = lv[s.idx()] as usize;
            let mut digits = wdigits[s.idx()].clone();
            let mut t = sub[s.idx()];
            for i in l..h - 1 {
                digits.push(digit[i][t as usize]);
                t = parent[i][t as usize];
            }
            switch_addr.push(SwitchAddr {
                level: l as u32,
                digits,
            });
        }
        let spec = PgftSpec {
            kind: SpecKind::Pgft,
            h,
            m,
            w,
            p,
        };
        spec.validate()
            .map_err(|e| fail(format!("the structure suggests {spec}, which is not valid: {e}")))?;
        if spec.num_switches() != n as u64 || spec.num_end_nodes() != fabric.num_end_ports() as u64 {
            return Err(fail(format!(
                "the port groups suggest {spec} with {} switches and {} end nodes, the fabric has {} and {}",
                spec.num_switches(),
                spec.num_end_nodes(),
                n,
                fabric.num_end_ports()
            )));
        }
        // The PGFT cabling rule: every parent differs from its child at index l + 1 only.
        let mut at: HashMap<&SwitchAddr, SwitchId> = HashMap::with_capacity(n);
        for s in fabric.switch_ids() {
            if let Some(o) = at.insert(&switch_addr[s.idx()], s) {
                return Err(fail(format!(
                    "{} and {} get the same address {}",
                    name(o),
                    name(s),
                    switch_addr[s.idx()]
                )));
            }
        }
        for s in fabric.switch_ids() {
            let l = lv[s.idx()] as usize;
            let a = &switch_addr[s.idx()];
            for g in fabric.port_groups(s) {
                if lv[g.remote.idx()] as usize != l + 1 {
                    continue;
                }
                let r = &switch_addr[g.remote.idx()];
                if (0..h).any(|i| i != l + 1 && a.digits[i] != r.digits[i]) {
                    return Err(fail(format!(
                        "{} ({a}) is cabled to {} ({r}), not one of its PGFT parents",
                        name(s),
                        name(g.remote)
                    )));
                }
            }
        }
        // End-node indices: port rank on the leaf, then the leaf's m-digits.
        let mut end_port_index = vec![0u32; fabric.num_end_ports()];
        for &leaf in &by_level[0] {
            let a = &switch_addr[leaf.idx()];
            let mut base = 0u64;
            let mut scale = u64::from(spec.m[0]);
            for i in 1..h {
                base += u64::from(a.digits[i]) * scale;
                scale *= u64::from(spec.m[i]);
            }
            for (a0, &ep) in fabric.attached_end_ports(leaf).iter().enumerate() {
                end_port_index[ep.idx()] = (base + a0 as u64) as u32;
            }
        }
        Ok(PgftLayout::from_parts(spec, switch_addr, end_port_index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{degrade, generate, Degrade};

    /// Levels of a generated fabric from its layout.
    fn levels(g: &crate::gen::Generated) -> Vec<Option<u32>> {
        g.layout.switch_addr.iter().map(|a| Some(a.level)).collect()
    }

    #[test]
    fn generated_fabrics_give_the_generator_layout() {
        for s in [
            "PGFT(3;4,4,6;1,4,4;1,1,1)",
            "PGFT(3;2,2,3;1,2,2;1,2,1)",
            "PGFT(2;8,16;1,8;1,2)",
            "XGFT(3;3,2,2;1,2,3)",
            "KARY(3,3)",
            "QFT(3;4,4,4;1,2,2;1,1,1)",
        ] {
            let g = generate(&s.parse().unwrap()).unwrap();
            let got = PgftLayout::recognize_structure(&g.fabric, &levels(&g)).unwrap();
            assert_eq!(got.spec.m, g.layout.spec.m, "{s}");
            assert_eq!(got.spec.w, g.layout.spec.w, "{s}");
            assert_eq!(got.spec.p, g.layout.spec.p, "{s}");
            assert_eq!(got.switch_addr, g.layout.switch_addr, "{s}");
            assert_eq!(got.end_port_index, g.layout.end_port_index, "{s}");
        }
    }

    #[test]
    fn degraded_and_cross_connected_fabrics_are_refused_with_a_reason() {
        let g = generate(&"PGFT(3;4,4,6;1,4,4;1,1,1)".parse().unwrap()).unwrap();
        let d = degrade(
            &g.fabric,
            &Degrade {
                remove_links: 1,
                remove_switches: 0,
                seed: 1,
            },
        )
        .unwrap();
        let e = PgftLayout::recognize_structure(&d, &levels(&g))
            .unwrap_err()
            .to_string();
        assert!(e.contains("children") || e.contains("down"), "{e}");
        // A QFT with cross-connected groups has the port-group counts of a PGFT, not its cabling.
        let q = generate(&"QFT(3;4,4,4;1,2,2;1,2,1)".parse().unwrap()).unwrap();
        let e = PgftLayout::recognize_structure(&q.fabric, &levels(&q))
            .unwrap_err()
            .to_string();
        assert!(e.contains("PGFT") || e.contains("parents"), "{e}");
        // A leaf with no level.
        let mut lv = levels(&g);
        lv[0] = None;
        let e = PgftLayout::recognize_structure(&g.fabric, &lv).unwrap_err().to_string();
        assert!(e.contains("no level"), "{e}");
    }
}
