//! Support of `umad_mcast.rs`: the multicast forwarding tables read back from every switch
//! (`ibroute -M`), an independent check that the tables of one MLID form one loop-free
//! up*-down* tree over live cables spanning exactly the receiving members, an independent
//! flood through those tables, P_Key tables read with `smpquery pkeys`, MCMemberRecords
//! read with `fabric-saquery mcmr` (whole table, user-space RMPP), and joins run on many
//! simulated hosts at once.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use fabric_ibsim_harness::{parse_ibroute_mcast, parse_smpquery_pkeys, Ibsim};
use fabric_sa::records::{McMemberRecord, Record};
use fabric_topology::{EndPortId, Fabric, Guid, Remote, SwitchId};

use crate::support::{dr_path, host, spawn_fabric_saquery, ClientRun};

/// A switch's MFT as `ibroute -M` shows it: MLID → ports of its mask.
pub type Mft = BTreeMap<u64, Vec<u32>>;
/// Switch ports out of service: (switch GUID, port), both ends of an unlinked cable.
pub type Dead = BTreeSet<(Guid, u8)>;

/// The IPoIB IPv4 broadcast MGID of the default partition (OpenSM's first group).
pub const IPOIB_V4: &str = "ff12:401b:ffff::ffff:ffff";
/// The IPoIB IPv6 all-nodes MGID of the default partition (fabricd creates it at start).
pub const IPOIB_V6: &str = "ff12:601b:ffff::1";

/// The MFT of every switch (`ibroute -M -D <route>` from end port `from` over live cables).
pub fn read_mfts(sim: &Ibsim, host_id: &str, f: &Fabric, from: EndPortId, dead: &Dead) -> HashMap<Guid, Mft> {
    f.switch_ids()
        .map(|s| {
            let path = dr_path(f, from, s, dead);
            let (ok, text) = sim.tool_on(host_id, "ibroute", &["-M", "-D", &path]);
            assert!(ok, "ibroute -M -D {path} failed:\n{text}");
            (f.switch(s).guid, parse_ibroute_mcast(&text))
        })
        .collect()
}

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

/// Reads the MFTs until `check` holds for them (the last upload may still be running), at
/// most `within`; panics with the last error.
pub fn wait_mfts<T>(
    sim: &Ibsim,
    host_id: &str,
    f: &Fabric,
    from: EndPortId,
    dead: &Dead,
    within: Duration,
    check: impl Fn(&HashMap<Guid, Mft>) -> Result<T, String>,
) -> (HashMap<Guid, Mft>, T) {
    let t0 = Instant::now();
    loop {
        let mfts = read_mfts(sim, host_id, f, from, dead);
        match check(&mfts) {
            Ok(v) => return (mfts, v),
            Err(e) => assert!(
                t0.elapsed() < within,
                "the switches' MFTs (ibroute -M) are still wrong after {within:?}:\n{e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A port's P_Key table as `smpquery pkeys <lid> <port>` shows it, without the empty entries.
pub fn pkeys(sim: &Ibsim, host_id: &str, lid: u64, port: u8) -> BTreeSet<u16> {
    let (ok, text) = sim.tool_on(host_id, "smpquery", &["pkeys", &lid.to_string(), &port.to_string()]);
    assert!(ok, "smpquery pkeys {lid} {port} failed:\n{text}");
    parse_smpquery_pkeys(&text).into_iter().filter(|&p| p != 0).collect()
}

/// The MCMemberRecords of a `fabric-saquery` answer (those delivered whole).
pub fn mc_records(r: &ClientRun) -> Vec<McMemberRecord> {
    r.delivered_records()
        .iter()
        .map(|b| McMemberRecord::decode(b).unwrap_or_else(|e| panic!("MCMemberRecord image: {e}")))
        .collect()
}

/// Every JSON document a `fabric-saquery` run printed (one per line).
pub fn json_lines(r: &ClientRun) -> Vec<serde_json::Value> {
    r.stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("fabric-saquery {:?}: {e}: {l}", r.args)))
        .collect()
}

/// Runs `fabric-saquery <args(end port)>` on the host of every end port of `ports`, at most
/// `parallel` at once (the simulator takes 10 clients), each within `within`; every run must
/// exit 0 and every answer have status 0.
pub fn on_each_host(
    sim: &Ibsim,
    f: &Fabric,
    ports: &[EndPortId],
    parallel: usize,
    within: Duration,
    args: impl Fn(EndPortId) -> Vec<String>,
) {
    let mut running: VecDeque<(
        EndPortId,
        std::process::Child,
        std::path::PathBuf,
        std::path::PathBuf,
        Instant,
    )> = VecDeque::new();
    let mut next = ports.iter();
    loop {
        while running.len() < parallel {
            let Some(&e) = next.next() else { break };
            let a = args(e);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let (child, out, err) = spawn_fabric_saquery(sim, &host(f, e), &a, &format!("host-{}", e.0));
            running.push_back((e, child, out, err, Instant::now()));
        }
        let Some((e, mut child, out, err, t0)) = running.pop_front() else {
            return;
        };
        loop {
            if let Some(st) = child.try_wait().expect("wait fabric-saquery") {
                let stdout = std::fs::read_to_string(&out).unwrap_or_default();
                let stderr = std::fs::read_to_string(&err).unwrap_or_default();
                assert!(
                    st.success(),
                    "fabric-saquery on {}: {st}\n{stdout}\n{stderr}",
                    host(f, e)
                );
                for l in stdout.lines().filter(|l| l.starts_with('{')) {
                    let v: serde_json::Value = serde_json::from_str(l).expect("JSON");
                    assert_eq!(v["status"], 0, "fabric-saquery on {}: {l}", host(f, e));
                }
                break;
            }
            if t0.elapsed() > within {
                let _ = child.kill();
                let _ = child.wait();
                panic!("fabric-saquery on {} did not finish within {within:?}", host(f, e));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
