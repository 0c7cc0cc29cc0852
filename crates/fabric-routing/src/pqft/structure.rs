//! The QFT tuples of a complete quasi fat-tree from its structure alone (QFT paper Sec. III):
//! ranking levels, port groups and the cabling, whatever the names, GUIDs and port numbers (a
//! fabric read from an `ibnetdiscover` dump).
//!
//! With a single cross-connected level `c` (`p_c > 1`, below the top; the shapes the closed form
//! covers), the QFT connection rule (eq. 6) makes the `p_c` level-`c` switches that differ only
//! in `s_{c+1} mod p_c` *twins*: the same children (their whole cross-connected group) and the
//! same parents. Nowhere else in a (quasi) fat-tree do two non-top switches share both. Merging
//! every twin class into one switch (its cables kept, so `p_c` parallel cables to each neighbour)
//! gives the complete PGFT
//!
//! `PGFT(h; .., p_c m_c, m_{c+1} / p_c, ..; w; .., p_c, p_c, ..)`
//!
//! (level `c`'s child digit is eq. 7's `f = q_c + m_c (q_{c+1} mod p_c)`, level `c+1`'s the
//! group `⌊s_{c+1} / p_c⌋`), which Dmodk's structural recognition
//! ([`PgftLayout::recognize_structure`]) numbers. Splitting the digits back gives the QFT
//! tuples; a twin's position in its class (by GUID) is `s_{c+1} mod p_c`. A fabric without twins
//! is recognised as a PGFT directly (every `p_l = 1`: the QFT without cross-connections).
//!
//! The tuples are then **checked**: the QFT of the inferred spec is generated and every switch
//! must have exactly the cables of its tuple's switch (eqs. 6–8), end ports included, which also
//! gives each switch's map from the generator's port numbers (eqs. 7–8, what the closed form
//! computes) to its own. Because every switch of a twin class is interchangeable (and so are the
//! end ports of a leaf, and the sub-trees of one cross-connected group), the tuples are fixed only
//! up to an automorphism of the QFT; the routing is the closed form under those tuples. When the
//! GUIDs follow the generator's order (generated fabrics and their dumps) they are the
//! generator's tuples.

use std::collections::HashMap;

use fabric_topology::gen::{generate, PgftLayout, PgftSpec, SwitchAddr};
use fabric_topology::{fmt_guid, Fabric, FabricBuilder, NodeType, PortNum, Remote, SwitchId};

use super::layout::{PortMap, QftLayout};

/// The tuples of the complete QFT `f` from its structure (`level`: the ranking's, leaves at 0).
pub(crate) fn structural_layout(f: &Fabric, level: &[Option<u32>]) -> Result<QftLayout, String> {
    let n = f.num_switches();
    let name = |s: SwitchId| format!("switch {} '{}'", fmt_guid(f.switch(s).guid), f.switch(s).desc);
    let mut lv = vec![0u32; n];
    for s in f.switch_ids() {
        if !f.switch(s).up {
            return Err(format!(
                "{} is down (from structure, only a complete QFT is recognised)",
                name(s)
            ));
        }
        lv[s.idx()] = level
            .get(s.idx())
            .copied()
            .flatten()
            .ok_or_else(|| format!("{} has no level in the ranking", name(s)))?;
    }
    let top = lv.iter().copied().max().unwrap_or(0);
    // Twin classes: non-top switches with the same neighbour sets.
    let mut classes: HashMap<(u32, Vec<u32>), Vec<SwitchId>> = HashMap::new();
    for s in f.switch_ids() {
        // Leaves differ by their end ports, top switches may share all their children.
        if lv[s.idx()] == top || lv[s.idx()] == 0 {
            continue;
        }
        let mut nb: Vec<u32> = f.port_groups(s).iter().map(|g| g.remote.0).collect();
        nb.sort_unstable();
        classes.entry((lv[s.idx()], nb)).or_default().push(s);
    }
    let mut twins: Vec<Vec<SwitchId>> = classes.into_values().filter(|c| c.len() > 1).collect();
    if twins.is_empty() {
        // No cross-connections: a PGFT (p_l = 1 is the QFT without them; parallel cables are
        // refused by the closed form with the reason).
        let l = PgftLayout::recognize_structure(f, level).map_err(|e| e.to_string())?;
        let index: Vec<u64> = l.end_port_index.iter().map(|&d| u64::from(d)).collect();
        // The port map needs one cable per neighbour; with parallel cables the closed form
        // refuses the fabric anyway (with that reason).
        let ports = if l.spec.p.iter().all(|&p| p == 1) {
            Some(check_cabling(f, &l.spec, &l.switch_addr, &index)?)
        } else {
            None
        };
        return Ok(QftLayout {
            index,
            addr: l.switch_addr,
            spec: l.spec,
            complete: true,
            ports,
        });
    }
    for c in &mut twins {
        c.sort_by_key(|&s| f.switch(s).guid);
    }
    twins.sort_by_key(|c| f.switch(c[0]).guid);
    let lc = lv[twins[0][0].idx()] as usize;
    let p = twins[0].len() as u32;
    if let Some(c) = twins
        .iter()
        .find(|c| lv[c[0].idx()] as usize != lc || c.len() as u32 != p)
    {
        return Err(format!(
            "{} and {} other switches of level {} have the same neighbours, {} and {} of level {lc}: \
             the closed form needs a single cross-connected level with groups of one size",
            name(c[0]),
            c.len() - 1,
            lv[c[0].idx()],
            name(twins[0][0]),
            p - 1
        ));
    }
    // Class (quotient switch) and position in its class of every switch.
    let mut class = vec![u32::MAX; n];
    let mut rank = vec![0u32; n];
    for (k, c) in twins.iter().enumerate() {
        for (t, &s) in c.iter().enumerate() {
            class[s.idx()] = k as u32;
            rank[s.idx()] = t as u32;
        }
    }
    let (q, qid, qlevel) = quotient(f, &lv, &twins, &class)?;
    let ql = PgftLayout::recognize_structure(&q, &qlevel)
        .map_err(|e| format!("merging the twin switches of level {lc} does not give a PGFT: {e}"))?;
    let qs = &ql.spec;
    // The quotient's parallel cables are the cross-connections: levels lc and lc + 1.
    let expect: Vec<u32> = (0..qs.h).map(|i| if i == lc || i == lc + 1 { p } else { 1 }).collect();
    if qs.p != expect || lc + 1 >= qs.h || !qs.m[lc].is_multiple_of(p) {
        return Err(format!(
            "merging the twin switches of level {lc} gives {qs}, not the PGFT of a QFT cross-connected there"
        ));
    }
    let (mc, mc1) = (qs.m[lc] / p, qs.m[lc + 1] * p);
    let mut m = qs.m.clone();
    m[lc] = mc;
    m[lc + 1] = mc1;
    let mut pv = vec![1u32; qs.h];
    pv[lc] = p;
    let spec = PgftSpec::qft(m, qs.w.clone(), pv).map_err(|e| format!("the structure suggests an invalid QFT: {e}"))?;
    // Split the quotient digits: position (index lc) and group (index lc + 1) of the m-digits
    // below the cross-connected level; the twin rank at it.
    let split = |digits: &mut [u32], below: bool, t: u32| {
        if below {
            let (pos, g) = (digits[lc], digits[lc + 1]);
            digits[lc] = pos % mc;
            digits[lc + 1] = g * p + pos / mc;
        } else {
            digits[lc + 1] = digits[lc + 1] * p + t;
        }
    };
    let mut addr = Vec::with_capacity(n);
    for s in f.switch_ids() {
        let mut a = ql.switch_addr[qid[s.idx()].idx()].clone();
        let l = a.level as usize;
        if l <= lc {
            split(&mut a.digits, l < lc, rank[s.idx()]);
        }
        addr.push(a);
    }
    let mut index = Vec::with_capacity(f.num_end_ports());
    for e in f.end_port_ids().map(|e| f.end_port(e)) {
        let qe = q
            .end_port_by_guid(e.port_guid)
            .expect("the quotient has every end port");
        let mut a = qs.node_digits(u64::from(ql.end_port_index[qe.idx()]));
        split(&mut a, true, 0);
        index.push(spec.node_index(&a));
    }
    let ports = check_cabling(f, &spec, &addr, &index)?;
    Ok(QftLayout {
        spec,
        addr,
        index,
        complete: true,
        ports: Some(ports),
    })
}

/// A fabric with its twin classes merged: the fabric, the merged switch of every switch of the
/// original, and the levels.
type Quotient = (Fabric, Vec<SwitchId>, Vec<Option<u32>>);

/// The fabric with every twin class merged into its lowest-GUID switch (all the class' cables,
/// renumbered), its switch id for every switch of `f`, and its levels.
fn quotient(f: &Fabric, lv: &[u32], twins: &[Vec<SwitchId>], class: &[u32]) -> Result<Quotient, String> {
    let n = f.num_switches();
    let mut b = FabricBuilder::new();
    let mut qid = vec![SwitchId(u32::MAX); n];
    // New port of every (switch, port).
    let mut qport: Vec<Vec<PortNum>> = vec![Vec::new(); n];
    let mut qlevel = Vec::new();
    let err = |e: fabric_topology::TopologyError| e.to_string();
    for s in f.switch_ids() {
        let sw = f.switch(s);
        let k = class[s.idx()];
        if k != u32::MAX && twins[k as usize][0] != s {
            continue;
        }
        let members: &[SwitchId] = if k == u32::MAX {
            std::slice::from_ref(&s)
        } else {
            &twins[k as usize]
        };
        let mut next = 0usize;
        if members.len() == 1 {
            qport[s.idx()] = (0..=sw.nports).collect();
            next = usize::from(sw.nports);
        } else {
            for &x in members {
                let xs = f.switch(x);
                qport[x.idx()] = vec![0; usize::from(xs.nports) + 1];
                for (pn, _) in xs.external_ports() {
                    next += 1;
                    qport[x.idx()][pn as usize] = next.min(255) as PortNum;
                }
            }
        }
        if next > 254 {
            return Err(format!(
                "the {} twin switches of {} have {next} cables, more than a switch of the merged PGFT can hold",
                members.len(),
                fmt_guid(sw.guid)
            ));
        }
        let id = b
            .add_switch(sw.guid, sw.desc.clone(), next.max(1) as PortNum)
            .map_err(err)?;
        qlevel.push(Some(lv[s.idx()]));
        for &x in members {
            qid[x.idx()] = id;
        }
    }
    for e in f.end_port_ids().map(|e| f.end_port(e)) {
        let Some((sw, pn)) = e.attach else {
            return Err(format!("end port {} is not cabled", fmt_guid(e.port_guid)));
        };
        let id = b
            .add_end_port(e.port_guid, e.node_guid, e.desc.clone(), 1, 1, NodeType::Compute)
            .map_err(err)?;
        b.connect_end_port(id, qid[sw.idx()], qport[sw.idx()][pn as usize])
            .map_err(err)?;
    }
    for s in f.switch_ids() {
        for (pn, port) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, port: rp } = port.remote {
                if f.switch_link_live(s, pn).is_none() {
                    return Err(format!(
                        "switch {} port {pn}: the cable is down (from structure, only a complete QFT is recognised)",
                        fmt_guid(f.switch(s).guid)
                    ));
                }
                if (s, pn) < (sw, rp) {
                    b.connect_switches(
                        qid[s.idx()],
                        qport[s.idx()][pn as usize],
                        qid[sw.idx()],
                        qport[sw.idx()][rp as usize],
                    )
                    .map_err(err)?;
                }
            }
        }
    }
    Ok((b.build(), qid, qlevel))
}

/// Checks that `f` with these tuples is the QFT `spec` cable by cable (eqs. 6–8) and returns,
/// per switch, the port of the generator's numbering → the switch's own port.
fn check_cabling(f: &Fabric, spec: &PgftSpec, addr: &[SwitchAddr], index: &[u64]) -> Result<PortMap, String> {
    let g = generate(spec).map_err(|e| format!("{spec}: {e}"))?;
    let ef = &g.fabric;
    if ef.num_switches() != f.num_switches() || ef.num_end_ports() != f.num_end_ports() {
        return Err(format!(
            "{spec} has {} switches and {} end nodes, the fabric {} and {}",
            ef.num_switches(),
            ef.num_end_ports(),
            f.num_switches(),
            f.num_end_ports()
        ));
    }
    let name = |s: SwitchId| format!("switch {} '{}'", fmt_guid(f.switch(s).guid), f.switch(s).desc);
    let mut gid = vec![SwitchId(u32::MAX); f.num_switches()];
    let mut seen = vec![false; ef.num_switches()];
    for s in f.switch_ids() {
        let x = g
            .layout
            .switch_of(&addr[s.idx()])
            .ok_or_else(|| format!("{} gets {}, not a switch of {spec}", name(s), addr[s.idx()]))?;
        if std::mem::replace(&mut seen[x.idx()], true) {
            return Err(format!("two switches get the tuple {} of {spec}", addr[s.idx()]));
        }
        gid[s.idx()] = x;
    }
    let mut ports = PortMap::new(f.num_switches());
    for s in f.switch_ids() {
        let es = ef.switch(gid[s.idx()]);
        // Generator port by remote: its switch, or its end node index.
        let mut by_remote: HashMap<(bool, u64), PortNum> = HashMap::new();
        for (pn, p) in es.external_ports() {
            match p.remote {
                Remote::Switch { sw, .. } => by_remote.insert((true, u64::from(sw.0)), pn),
                Remote::EndPort(e) => by_remote.insert((false, u64::from(e.0)), pn),
                Remote::None => None,
            };
        }
        let mut cabled = 0;
        for (pn, p) in f.switch(s).external_ports() {
            let key = match p.remote {
                Remote::Switch { sw, .. } => (true, u64::from(gid[sw.idx()].0)),
                Remote::EndPort(e) => (false, index[e.idx()]),
                Remote::None => continue,
            };
            let gp = by_remote.get(&key).copied().ok_or_else(|| {
                format!(
                    "{} ({}) port {pn} is not cabled as in {spec} (eqs. 6–8)",
                    name(s),
                    addr[s.idx()]
                )
            })?;
            ports.set(s, gp, pn);
            cabled += 1;
        }
        if cabled != by_remote.len() {
            return Err(format!(
                "{} ({}) has {cabled} cables, its switch of {spec} {}",
                name(s),
                addr[s.idx()],
                by_remote.len()
            ));
        }
    }
    Ok(ports)
}
