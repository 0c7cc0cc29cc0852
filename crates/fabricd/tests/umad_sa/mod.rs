//! Support of `umad_sa.rs`: the fabric, LIDs and installed LFTs read back from the switches
//! (`ibroute`), an independent hop-by-hop walk of those tables, the `saquery` answers of one
//! subnet manager collected into maps keyed by GUIDs (so that two managers with different
//! LID plans compare), and the project's own wire client `fabric-saquery` run under the shim.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fabric_ibsim_harness::saquery::{gid, saquery, SaqueryRecord, SaqueryRun};
use fabric_ibsim_harness::{parse_ibroute, wait_with_deadline, Ibsim};
use fabric_topology::{EndPortId, Fabric, Guid, Remote, SwitchId};

/// 16 leaves × 16 CAs = 256 end ports, 8 spines (24 switches): a few hundred nodes, up and
/// routed by either manager in about a second under ibsim.
pub const SPEC: &str = "PGFT(2;16,16;1,8;1,1)";
/// The subnet prefix both managers use (the default).
pub const PREFIX: u64 = 0xfe80_0000_0000_0000;
/// OpenSM's SM priority in these tests ([`fabric_ibsim_harness::saquery::OpenSm::start`]).
pub const OPENSM_PRIORITY: u64 = 15;

/// The generated fabric.
pub fn fabric() -> Fabric {
    fabric_topology::gen::generate_str(SPEC, None).expect("generate the fat-tree")
}

/// The ibsim node id of an end port's CA (`H-<node GUID>`).
pub fn host(f: &Fabric, e: EndPortId) -> String {
    format!("H-{:016x}", f.end_port(e).node_guid)
}

/// The leaf and port an end port is cabled to.
pub fn attach(f: &Fabric, e: EndPortId) -> (SwitchId, u8) {
    f.end_port(e)
        .attach
        .unwrap_or_else(|| panic!("end port {e:?} is not cabled"))
}

/// End ports: the manager's (0), the tools' (first of the second leaf), and a spread sample.
pub fn tool_port(f: &Fabric) -> EndPortId {
    let me = attach(f, EndPortId(0)).0;
    f.end_port_ids()
        .find(|&e| attach(f, e).0 != me)
        .expect("an end port on another leaf")
}

/// Every `step`-th end port.
pub fn sample_ports(f: &Fabric, step: usize) -> Vec<EndPortId> {
    f.end_port_ids().step_by(step).collect()
}

/// Every third switch (leaves and spines of the generated fat-tree alike).
pub fn sample_switches(f: &Fabric) -> Vec<SwitchId> {
    f.switch_ids().step_by(3).collect()
}

/// The switch ports of the first leaf whose records are read: its first four CA ports and
/// every uplink.
pub fn leaf_ports(f: &Fabric) -> (SwitchId, Vec<u8>) {
    let leaf = attach(f, EndPortId(0)).0;
    let mut cas = 0;
    let ports = f
        .switch(leaf)
        .external_ports()
        .filter(|(_, port)| match port.remote {
            Remote::EndPort(_) => {
                cas += 1;
                cas <= 4
            }
            _ => true,
        })
        .map(|(p, _)| p)
        .collect();
    (leaf, ports)
}

/// A leaf uplink: (leaf, port, spine, spine port) of the first leaf's first uplink.
pub fn leaf_uplink(f: &Fabric) -> (SwitchId, u8, SwitchId, u8) {
    let leaf = attach(f, EndPortId(0)).0;
    f.switch(leaf)
        .external_ports()
        .find_map(|(p, port)| match port.remote {
            Remote::Switch { sw, port: q } => Some((leaf, p, sw, q)),
            _ => None,
        })
        .expect("the leaf has an uplink")
}

/// Pseudo-random pairs of distinct end ports (fixed seed).
pub fn pairs(f: &Fabric, n: usize) -> Vec<(EndPortId, EndPortId)> {
    let len = f.num_end_ports();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as usize % len
    };
    let mut out = Vec::new();
    while out.len() < n {
        let (a, b) = (next(), next());
        if a != b {
            out.push((EndPortId(a as u32), EndPortId(b as u32)));
        }
    }
    out
}

/// The LIDs in force, read from the tool host's leaf (`ibroute -D 0,1`: its destinations name
/// the port GUID owning each LID, escape LIDs as `path #2 out of 2: portguid ...`).
#[derive(Clone, Debug, Default)]
pub struct Lids {
    pub owner: BTreeMap<u64, Guid>,
    pub of: BTreeMap<Guid, Vec<u64>>,
}

impl Lids {
    /// The base LID of a port GUID.
    pub fn base(&self, guid: Guid) -> u64 {
        self.of
            .get(&guid)
            .and_then(|l| l.first().copied())
            .unwrap_or_else(|| panic!("no LID for port 0x{guid:016x}"))
    }
    /// The escape LID (base + 1, LMC 1) of a port GUID.
    pub fn escape(&self, guid: Guid) -> u64 {
        let l = &self.of[&guid];
        assert!(l.len() >= 2, "port 0x{guid:016x} has no escape LID: {l:?}");
        l[1]
    }
    /// The port GUID owning `lid`, and the LID's offset in the port's LMC range.
    pub fn named(&self, lid: u64) -> String {
        match self.owner.get(&lid) {
            Some(g) => format!("0x{g:016x}+{}", lid - self.base(*g)),
            None if lid == 0 => "0".to_string(),
            None => format!("unknown LID {lid}"),
        }
    }
}

/// Reads [`Lids`] on `host`.
pub fn read_lids(sim: &Ibsim, host: &str) -> Lids {
    let (ok, text) = sim.tool_on(host, "ibroute", &["-D", "0,1"]);
    assert!(ok, "ibroute -D 0,1 failed:\n{text}");
    let mut lids = Lids::default();
    for l in text.lines() {
        let Some(hex) = l.strip_prefix("0x") else { continue };
        let Some(lid) = hex
            .split_whitespace()
            .next()
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        else {
            continue;
        };
        let Some(g) = l
            .split("portguid 0x")
            .nth(1)
            .and_then(|r| u64::from_str_radix(&r[..16.min(r.len())], 16).ok())
        else {
            continue;
        };
        lids.owner.insert(lid, g);
        lids.of.entry(g).or_default().push(lid);
    }
    for v in lids.of.values_mut() {
        v.sort_unstable();
    }
    assert!(!lids.owner.is_empty(), "no LID in ibroute -D 0,1:\n{text}");
    lids
}

/// A directed route (`0,1,...`) from end port `from` to switch `to` over live cables (BFS on
/// the model without the `dead` switch ports).
pub fn dr_path(f: &Fabric, from: EndPortId, to: SwitchId, dead: &BTreeSet<(Guid, u8)>) -> String {
    let (leaf, _) = attach(f, from);
    let mut prev: HashMap<SwitchId, (SwitchId, u8)> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([leaf]);
    let mut seen = BTreeSet::from([leaf]);
    while let Some(s) = queue.pop_front() {
        if s == to {
            break;
        }
        for (p, port) in f.switch(s).external_ports() {
            if dead.contains(&(f.switch(s).guid, p)) {
                continue;
            }
            if let Remote::Switch { sw, port: q } = port.remote {
                if dead.contains(&(f.switch(sw).guid, q)) || !seen.insert(sw) {
                    continue;
                }
                prev.insert(sw, (s, p));
                queue.push_back(sw);
            }
        }
    }
    let mut hops = Vec::new();
    let mut at = to;
    while at != leaf {
        let (s, p) = *prev.get(&at).unwrap_or_else(|| panic!("switch {to:?} unreachable"));
        hops.push(p);
        at = s;
    }
    hops.reverse();
    let mut s = "0,1".to_string();
    for h in hops {
        s.push_str(&format!(",{h}"));
    }
    s
}

/// The LFT of every switch as it holds it (`ibroute -D <route>` from `from`): GUID → LID → port.
pub fn read_lfts(
    sim: &Ibsim,
    host: &str,
    f: &Fabric,
    from: EndPortId,
    dead: &BTreeSet<(Guid, u8)>,
) -> HashMap<Guid, BTreeMap<u64, u64>> {
    f.switch_ids()
        .map(|s| {
            let path = dr_path(f, from, s, dead);
            let (ok, text) = sim.tool_on(host, "ibroute", &["-D", &path]);
            assert!(ok, "ibroute -D {path} failed:\n{text}");
            (f.switch(s).guid, parse_ibroute(&text))
        })
        .collect()
}

/// A hop-by-hop walk of the installed `lfts` from end port `src` to `dlid`: the switches
/// crossed (GUID, in port, out port), or why the packet is lost.
pub fn walk(
    f: &Fabric,
    lfts: &HashMap<Guid, BTreeMap<u64, u64>>,
    lids: &Lids,
    dead: &BTreeSet<(Guid, u8)>,
    src: EndPortId,
    dlid: u64,
) -> Result<Vec<(Guid, u8, u8)>, String> {
    let want = *lids
        .owner
        .get(&dlid)
        .ok_or_else(|| format!("LID {dlid} has no owner"))?;
    let (mut sw, mut inp) = attach(f, src);
    let mut hops = Vec::new();
    for _ in 0..64 {
        let g = f.switch(sw).guid;
        let port = *lfts
            .get(&g)
            .and_then(|t| t.get(&dlid))
            .ok_or_else(|| format!("switch 0x{g:016x} has no entry for LID {dlid}"))? as u8;
        hops.push((g, inp, port));
        if port == 0 {
            return if g == want {
                Ok(hops)
            } else {
                Err(format!(
                    "LID {dlid} delivered to switch 0x{g:016x}, owned by 0x{want:016x}"
                ))
            };
        }
        if dead.contains(&(g, port)) {
            return Err(format!(
                "switch 0x{g:016x} forwards LID {dlid} into its dead port {port}"
            ));
        }
        match f.switch(sw).ports.get(usize::from(port)).map(|p| p.remote) {
            Some(Remote::EndPort(e)) => {
                let pg = f.end_port(e).port_guid;
                return if pg == want {
                    Ok(hops)
                } else {
                    Err(format!(
                        "LID {dlid} delivered to port 0x{pg:016x}, owned by 0x{want:016x}"
                    ))
                };
            }
            Some(Remote::Switch { sw: next, port: q }) => {
                if dead.contains(&(f.switch(next).guid, q)) {
                    return Err(format!("switch 0x{g:016x} forwards LID {dlid} into a dead cable"));
                }
                sw = next;
                inp = q;
            }
            _ => return Err(format!("switch 0x{g:016x} forwards LID {dlid} to uncabled port {port}")),
        }
    }
    Err(format!("LID {dlid}: a loop (64 hops)"))
}

/// Timing of one kind of `saquery` command.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    pub runs: usize,
    pub total: Duration,
    pub max: Duration,
}

/// What one manager's SA answered through `saquery`, normalised: LIDs named by the GUID of the
/// port owning them (and the offset in its LMC range), per record kind a map from a key
/// naming the record (GUIDs, ports) to its fields.
#[derive(Clone, Debug, Default)]
pub struct Answers {
    pub records: BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>,
    pub timings: BTreeMap<String, Timing>,
    /// Path records: (source, destination LIDs as named, hop limit).
    pub paths: Vec<(EndPortId, u64, u64, SaqueryRecord)>,
    /// LFT blocks answered: (switch GUID, block) → entries.
    pub lft_blocks: Vec<(Guid, u64, Vec<u64>)>,
}

impl Answers {
    fn run(&mut self, sim: &Ibsim, host: &str, what: &str, args: &[&str]) -> SaqueryRun {
        let r = saquery(sim, host, args);
        let t = self.timings.entry(what.to_string()).or_default();
        t.runs += 1;
        t.total += r.elapsed;
        t.max = t.max.max(r.elapsed);
        assert!(r.ok, "saquery {args:?} failed:\n{}", r.text);
        r
    }

    fn put(&mut self, kind: &str, key: String, fields: BTreeMap<String, String>) {
        self.records.entry(kind.to_string()).or_default().insert(key, fields);
    }

    /// The timings as a table (one line per command kind).
    pub fn timing_table(&self, who: &str) -> String {
        let mut s = format!("{who}: saquery command, runs, mean ms, max ms\n");
        for (k, t) in &self.timings {
            let mean = t.total.as_secs_f64() * 1e3 / t.runs.max(1) as f64;
            s.push_str(&format!(
                "  {k:<28} {:>4} {mean:>8.1} {:>8.1}\n",
                t.runs,
                t.max.as_secs_f64() * 1e3
            ));
        }
        s
    }
}

/// Keeps `names` of a record, LID-valued ones (`lid_fields`) named through `lids`.
fn pick(r: &SaqueryRecord, names: &[&str], lid_fields: &[&str], lids: &Lids) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for n in names {
        let v = r
            .get(n)
            .unwrap_or_else(|| panic!("{} has no field {n}: {:?}", r.kind, r.fields));
        m.insert(n.to_string(), v.to_string());
    }
    for n in lid_fields {
        m.insert(format!("{n}@"), lids.named(r.n(n)));
    }
    m
}

/// NodeInfo fields of a NodeRecord (all but the LID, which is named).
pub const NODE_FIELDS: &[&str] = &[
    "base_version",
    "class_version",
    "node_type",
    "num_ports",
    "sys_guid",
    "node_guid",
    "port_guid",
    "partition_cap",
    "device_id",
    "revision",
    "port_num",
    "vendor_id",
    "NodeDescription",
];
/// PortInfo fields a port reports by itself (the others are set by the manager: LIDs, SM LID,
/// M_Key lease, timeouts, HOQ life, VL stall, LMC of switch ports).
pub const PORT_FIELDS: &[&str] = &[
    "PortNum",
    "LocalPort",
    "LinkWidthSupported",
    "LinkWidthActive",
    "LinkSpeedSupported",
    "LinkSpeedActive",
    "LinkState",
    "PhysLinkState",
    "MtuCap",
    "VLCap",
    "GuidCap",
    "CapabilityMask2",
];
/// SwitchInfo fields the switch reports by itself.
pub const SWITCH_FIELDS: &[&str] = &[
    "LinearFDBCap",
    "RandomFDBCap",
    "MulticastFDBCap",
    "DefaultPort",
    "LIDsPerPort",
    "PartitionEnforcementCap",
];
/// PathRecord fields that depend neither on the LID plan nor on the routing.
pub const PATH_FIELDS: &[&str] = &[
    "service_id",
    "dgid",
    "sgid",
    "tclass",
    "num_path_revers",
    "pkey",
    "qos_class",
    "mtu",
    "rate",
    "pkt_life",
    "preference",
];

/// Collects the answers of the SA of `sm_port` (the manager's port GUID) through `saquery` run
/// on `tool`: NodeRecords, PortInfoRecords, SwitchInfoRecords, LinkRecords, LFT records,
/// GUIDInfoRecords, SMInfoRecord, ServiceRecords, InformInfoRecords, multicast groups, and
/// PathRecords between `pairs` (base and escape LIDs, `--src-to-dst` and `--sgid-to-dgid`).
/// Checks every answer against the model and the tables read back (`lfts`).
#[allow(clippy::too_many_arguments)]
pub fn collect(
    sim: &Ibsim,
    tool: EndPortId,
    f: &Fabric,
    lids: &Lids,
    lfts: &HashMap<Guid, BTreeMap<u64, u64>>,
    dead: &BTreeSet<(Guid, u8)>,
    sm_port: Guid,
    pairs: &[(EndPortId, EndPortId)],
) -> Answers {
    let host = host(f, tool);
    let h = host.as_str();
    let mut a = Answers::default();
    // NodeRecord by LID: a sample of switches and CAs.
    let mut ports: Vec<(Guid, String)> = sample_switches(f)
        .into_iter()
        .map(|s| (f.switch(s).guid, f.switch(s).desc.clone()))
        .collect();
    ports.extend(sample_ports(f, 32).into_iter().map(|e| {
        let ep = f.end_port(e);
        (ep.port_guid, ep.desc.clone())
    }));
    for (g, desc) in &ports {
        let lid = lids.base(*g).to_string();
        let r = a.run(sim, h, "NR <lid>", &["NR", &lid]).real_records();
        assert_eq!(r.len(), 1, "saquery NR {lid}: {r:?}");
        assert_eq!(r[0].n("port_guid"), *g, "saquery NR {lid}");
        assert_eq!(r[0].get("NodeDescription"), Some(desc.as_str()), "saquery NR {lid}");
        a.put(
            "NodeRecord",
            format!("0x{g:016x}"),
            pick(&r[0], NODE_FIELDS, &["lid"], lids),
        );
    }
    // PortInfoRecord of the sampled CAs (LID) and of ports of the first leaf (LID/port).
    for e in sample_ports(f, 32) {
        let ep = f.end_port(e);
        let lid = lids.base(ep.port_guid).to_string();
        let r = a.run(sim, h, "PIR <lid>", &["PIR", &lid]).real_records();
        assert_eq!(r.len(), 1, "saquery PIR {lid}: {r:?}");
        assert_eq!(r[0].get("LinkState"), Some("Active"), "saquery PIR {lid}");
        assert_eq!(r[0].n("LMC"), 1, "saquery PIR {lid}: the CA's LMC");
        let mut m = pick(&r[0], PORT_FIELDS, &["EndPortLid", "Lid", "SMLid"], lids);
        assert_eq!(m["Lid@"], format!("0x{:016x}+0", ep.port_guid), "saquery PIR {lid}");
        assert_eq!(
            m["SMLid@"],
            format!("0x{sm_port:016x}+0"),
            "saquery PIR {lid}: MasterSMLID"
        );
        m.insert("LMC".into(), r[0].n("LMC").to_string());
        a.put("PortInfoRecord", format!("0x{:016x}/1", ep.port_guid), m);
    }
    let (leaf, read_ports) = leaf_ports(f);
    let lg = f.switch(leaf).guid;
    for &p in &read_ports {
        let port = &f.switch(leaf).ports[usize::from(p)];
        let arg = format!("{}/{p}", lids.base(lg));
        let r = a.run(sim, h, "PIR <lid>/<port>", &["PIR", &arg]).real_records();
        let live = port.remote != Remote::None && !dead.contains(&(lg, p));
        assert_eq!(r.len(), 1, "saquery PIR {arg}: {r:?}");
        assert_eq!(
            r[0].get("LinkState") == Some("Active"),
            live,
            "saquery PIR {arg}: link state {:?}",
            r[0].get("LinkState")
        );
        // A switch port's LocalPortNum is the port the manager's SMP entered the switch by
        // (OpenSM: 1 on its own leaf, 18 on another): it depends on the manager's routes.
        let mut names: Vec<&str> = PORT_FIELDS.iter().copied().filter(|n| *n != "LocalPort").collect();
        if !live {
            // A dead port's active width and speed are whatever it last trained to.
            names.retain(|n| !n.ends_with("Active"));
        }
        a.put(
            "PortInfoRecord",
            format!("0x{lg:016x}/{p}"),
            pick(&r[0], &names, &["EndPortLid"], lids),
        );
    }
    // SwitchInfoRecord of the sampled switches.
    for s in sample_switches(f).into_iter().map(|s| f.switch(s)) {
        let lid = lids.base(s.guid).to_string();
        let r = a.run(sim, h, "SWIR <lid>", &["SWIR", &lid]).real_records();
        assert_eq!(r.len(), 1, "saquery SWIR {lid}: {r:?}");
        let top = r[0].n("LinearFDBTop");
        let max = *lids.owner.keys().next_back().expect("LIDs");
        assert!(
            top >= max,
            "saquery SWIR {lid}: LinearFDBTop {top} below the top LID {max}"
        );
        a.put(
            "SwitchInfoRecord",
            format!("0x{:016x}", s.guid),
            pick(&r[0], SWITCH_FIELDS, &["LID"], lids),
        );
    }
    // LinkRecords from the first leaf, port by port, and the (first-segment) table.
    for &p in &read_ports {
        let port = &f.switch(leaf).ports[usize::from(p)];
        let arg = format!("{}/{p}", lids.base(lg));
        let r = a.run(sim, h, "LR <lid>/<port>", &["LR", &arg]).real_records();
        let live = port.remote != Remote::None && !dead.contains(&(lg, p));
        assert_eq!(r.len(), usize::from(live), "saquery LR {arg}: {r:?}");
        for l in &r {
            let (to, tp) = remote_of(f, leaf, p);
            assert_eq!(lids.owner.get(&l.n("ToLID")), Some(&to), "saquery LR {arg}: ToLID");
            assert_eq!(l.n("ToPort"), u64::from(tp), "saquery LR {arg}: ToPort");
            a.put(
                "LinkRecord",
                format!("0x{lg:016x}/{p}"),
                pick(l, &["FromPort", "ToPort"], &["FromLID", "ToLID"], lids),
            );
        }
    }
    let table = a.run(sim, h, "LR table (-x)", &["-x"]).real_records();
    assert!(!table.is_empty(), "saquery -x: no LinkRecord");
    for l in &table {
        let from = lids.owner[&l.n("FromLID")];
        let s = f.switch_by_guid(from).expect("LinkRecords start at switches");
        let (to, tp) = remote_of(f, s, l.n("FromPort") as u8);
        assert_eq!(lids.owner.get(&l.n("ToLID")), Some(&to), "saquery -x: {l:?}");
        assert_eq!(l.n("ToPort"), u64::from(tp), "saquery -x: {l:?}");
    }
    // LFT records: block 0 of the sampled switches equals what the switch holds.
    for s in sample_switches(f).into_iter().map(|s| f.switch(s)) {
        let arg = format!("{}/0", lids.base(s.guid));
        let r = a.run(sim, h, "LFTR <lid>/<block>", &["LFTR", &arg]).real_records();
        assert_eq!(r.len(), 1, "saquery LFTR {arg}: {r:?}");
        let entries: Vec<u64> = (0..64).map(|l| r[0].n(&format!("lft[{l}]"))).collect();
        for (l, &p) in entries.iter().enumerate() {
            let held = lfts[&s.guid].get(&(l as u64)).copied().unwrap_or(255);
            assert_eq!(p, held, "saquery LFTR {arg}: LID {l} -> {p}, the switch holds {held}");
        }
        a.lft_blocks.push((s.guid, 0, entries));
    }
    // GUIDInfoRecord of the sampled CAs: GUID 0 is the port GUID.
    for e in sample_ports(f, 64) {
        let g = f.end_port(e).port_guid;
        let lid = lids.base(g).to_string();
        let r = a.run(sim, h, "GIR <lid>", &["GIR", &lid]).real_records();
        let b0 = r
            .iter()
            .find(|b| b.n("Block") == 0)
            .unwrap_or_else(|| panic!("saquery GIR {lid}: no block 0: {r:?}"));
        assert_eq!(b0.n("GUID 0"), g, "saquery GIR {lid}");
        a.put(
            "GUIDInfoRecord",
            format!("0x{g:016x}/0"),
            pick(b0, &["GUID 0", "GUID 1"], &["LID"], lids),
        );
    }
    // SMInfoRecord: the manager, master.
    let r = a.run(sim, h, "SMIR", &["SMIR"]).real_records();
    assert_eq!(r.len(), 1, "saquery SMIR: {r:?}");
    assert_eq!(r[0].n("GUID"), sm_port, "saquery SMIR: the manager's port GUID");
    assert_eq!(r[0].n("SMState"), 3, "saquery SMIR: master");
    assert_eq!(lids.owner.get(&r[0].n("LID")), Some(&sm_port), "saquery SMIR: LID");
    a.put(
        "SMInfoRecord",
        "master".into(),
        pick(&r[0], &["SMState"], &["LID"], lids),
    );
    // ServiceRecords, InformInfoRecords (none registered), multicast groups.
    for (what, args) in [("SR (-S)", ["-S"]), ("IIR (-I)", ["-I"]), ("MCMR groups (-g)", ["-g"])] {
        let r = a.run(sim, h, what, &args).real_records();
        for (i, rec) in r.iter().enumerate() {
            a.put(what, format!("{i}"), rec.fields.clone());
        }
    }
    // PathRecords: base and escape LIDs, by LID and by GID; each follows the installed tables.
    for &(s, d) in pairs {
        let (sg, dg) = (f.end_port(s).port_guid, f.end_port(d).port_guid);
        for escape in [false, true] {
            let (sl, dl) = if escape {
                (lids.escape(sg), lids.escape(dg))
            } else {
                (lids.base(sg), lids.base(dg))
            };
            let arg = format!("{sl}:{dl}");
            let r = a.run(sim, h, "PR --src-to-dst", &["--src-to-dst", &arg]).real_records();
            assert_eq!(r.len(), 1, "saquery --src-to-dst {arg}: {r:?}");
            let p = &r[0];
            assert_eq!((p.n("slid"), p.n("dlid")), (sl, dl), "saquery --src-to-dst {arg}");
            assert_eq!(
                p.get("sgid"),
                Some(gid(PREFIX, sg).as_str()),
                "saquery --src-to-dst {arg}"
            );
            assert_eq!(
                p.get("dgid"),
                Some(gid(PREFIX, dg).as_str()),
                "saquery --src-to-dst {arg}"
            );
            let hops = walk(f, lfts, lids, dead, s, dl)
                .unwrap_or_else(|e| panic!("PathRecord {arg} answered, but the installed tables lose it: {e}"));
            let hop_limit = p.n("hop_flow_raw") & 0xff;
            assert!(
                hop_limit == 0 || hop_limit as usize == hops.len() + 1,
                "PathRecord {arg}: hop limit {hop_limit}, the tables take {} switches",
                hops.len()
            );
            let mut m = pick(p, PATH_FIELDS, &["slid", "dlid"], lids);
            if !escape {
                m.insert("sl".into(), p.get("sl").unwrap_or_default().to_string());
            }
            a.put("PathRecord", format!("0x{sg:016x}->0x{dg:016x} escape={escape}"), m);
            a.paths.push((s, sl, dl, p.clone()));
        }
        let arg = format!("{}-{}", gid(PREFIX, sg), gid(PREFIX, dg));
        let r = a
            .run(sim, h, "PR --sgid-to-dgid", &["--sgid-to-dgid", &arg])
            .real_records();
        assert!(!r.is_empty(), "saquery --sgid-to-dgid {arg}: no path");
        for p in &r {
            assert_eq!(
                lids.owner.get(&p.n("slid")),
                Some(&sg),
                "saquery --sgid-to-dgid {arg}: {p:?}"
            );
            assert_eq!(
                lids.owner.get(&p.n("dlid")),
                Some(&dg),
                "saquery --sgid-to-dgid {arg}: {p:?}"
            );
            walk(f, lfts, lids, dead, s, p.n("dlid"))
                .unwrap_or_else(|e| panic!("PathRecord {arg} answered, but the installed tables lose it: {e}"));
            let m = pick(p, PATH_FIELDS, &["slid", "dlid"], lids);
            a.put("PathRecord by GID", format!("{arg} {}->{}", m["slid@"], m["dlid@"]), m);
        }
    }
    a
}

/// The GUID (port GUID of a CA, GUID of a switch) and port at the other end of a switch port.
pub fn remote_of(f: &Fabric, s: SwitchId, p: u8) -> (Guid, u8) {
    match f.switch(s).ports.get(usize::from(p)).map(|x| x.remote) {
        Some(Remote::Switch { sw, port }) => (f.switch(sw).guid, port),
        Some(Remote::EndPort(e)) => (f.end_port(e).port_guid, f.end_port(e).port_num),
        _ => panic!("switch 0x{:016x} port {p} is not cabled", f.switch(s).guid),
    }
}

/// Field-by-field differences between two managers' answers (`kinds`: the record kinds to
/// compare), at most `max` lines.
pub fn differences(a: &Answers, b: &Answers, kinds: &[&str], max: usize) -> Vec<String> {
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for k in kinds {
        let ra = a.records.get(*k).unwrap_or(&empty);
        let rb = b.records.get(*k).unwrap_or(&empty);
        for key in ra.keys().chain(rb.keys()).collect::<BTreeSet<_>>() {
            match (ra.get(key), rb.get(key)) {
                (Some(x), Some(y)) if x == y => {}
                (Some(x), Some(y)) => {
                    for f in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                        if x.get(f) != y.get(f) {
                            out.push(format!("{k} {key}: {f}: {:?} vs {:?}", x.get(f), y.get(f)));
                        }
                    }
                }
                (x, y) => out.push(format!("{k} {key}: {x:?} vs {y:?}")),
            }
        }
    }
    out.truncate(max);
    out
}

/// `target/<profile>/fabric-saquery` (fabric-umad-probe's binary: `CARGO_BIN_EXE_` does not
/// reach another package's binary), built once per test process.
pub fn fabric_saquery_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps")
            .to_path_buf();
        let bin = profile_dir.join("fabric-saquery");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "fabric-umad-probe", "--bin", "fabric-saquery"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        // As `common::fabricctl_binary`: the variables describing fabricd's package would make
        // the nested build rerun build scripts.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_", "CARGO_CRATE_"]
                .iter()
                .any(|p| k.starts_with(p))
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&k.as_ref())
            {
                cmd.env_remove(k.as_ref());
            }
        }
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        } else {
            cmd.args(["--profile", "test"]);
        }
        if let Some(target) = profile_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let built = matches!(cmd.status(), Ok(s) if s.success());
        assert!(
            built && bin.is_file(),
            "could not build fabric-saquery (crates/fabric-umad-probe, bin fabric-saquery) into {}",
            bin.display()
        );
        bin
    })
    .clone()
}

/// One `fabric-saquery` run: exit status, its JSON document(s) on stdout, stderr.
#[derive(Debug)]
pub struct ClientRun {
    pub args: Vec<String>,
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl ClientRun {
    /// The one JSON document printed.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "fabric-saquery {:?}: stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.args, self.stdout, self.stderr
            )
        })
    }

    /// The answer's MAD status.
    pub fn status(&self) -> u64 {
        self.json()["status"]
            .as_u64()
            .unwrap_or_else(|| panic!("fabric-saquery {:?}: no numeric status:\n{}", self.args, self.stdout))
    }

    /// The records' wire images (`raw_records_hex`), decoded from hex, each with whether it
    /// arrived whole (`records_delivered`: under the shim bytes 176..200 of every MAD's SA data
    /// are lost, and the client says which records they touch).
    pub fn raw_records(&self) -> Vec<(Vec<u8>, bool)> {
        let v = self.json();
        let list = v["raw_records_hex"]
            .as_array()
            .unwrap_or_else(|| panic!("fabric-saquery {:?}: no raw_records_hex:\n{}", self.args, self.stdout));
        let delivered = v["records_delivered"].as_array();
        list.iter()
            .enumerate()
            .map(|(i, h)| {
                let h = h.as_str().expect("hex string");
                let bytes = (0..h.len() / 2)
                    .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex"))
                    .collect();
                let whole = delivered
                    .and_then(|d| d.get(i))
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(true);
                (bytes, whole)
            })
            .collect()
    }

    /// The records that arrived whole.
    pub fn delivered_records(&self) -> Vec<Vec<u8>> {
        self.raw_records()
            .into_iter()
            .filter(|(_, whole)| *whole)
            .map(|(r, _)| r)
            .collect()
    }
}

/// Starts `fabric-saquery <args>` under the shim on `host`, stdout and stderr to files in the
/// simulator's directory; the caller waits for it.
pub fn spawn_fabric_saquery(
    sim: &Ibsim,
    host: &str,
    args: &[&str],
    tag: &str,
) -> (std::process::Child, PathBuf, PathBuf) {
    let out = sim.dir().join(format!("fabric-saquery-{tag}.out"));
    let err = sim.dir().join(format!("fabric-saquery-{tag}.err"));
    let child = sim
        .command(&fabric_saquery_binary())
        .args(args)
        .env("SIM_HOST", host)
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("start fabric-saquery");
    (child, out, err)
}

/// Runs `fabric-saquery <args>` under the shim on `host` (`within` deadline).
pub fn fabric_saquery(sim: &Ibsim, host: &str, args: &[&str], within: Duration) -> ClientRun {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let tag = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string();
    let (mut child, out, err) = spawn_fabric_saquery(sim, host, args, &tag);
    let ok = wait_with_deadline(&mut child, within, &format!("fabric-saquery {args:?}")).success();
    ClientRun {
        args: args.iter().map(ToString::to_string).collect(),
        ok,
        stdout: std::fs::read_to_string(out).unwrap_or_default(),
        stderr: std::fs::read_to_string(err).unwrap_or_default(),
    }
}

/// The sum of `fabricd_sa_answers_total` samples whose `status` label is not success, and the
/// `fabricd_sa_malformed_total` value, from a Prometheus text exposition.
pub fn sa_error_counters(metrics: &str) -> (u64, u64) {
    let mut errors = 0;
    let mut malformed = 0;
    for l in metrics.lines() {
        let Some((name, value)) = l.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else { continue };
        if name.starts_with("fabricd_sa_answers_total{") {
            let status = name
                .split("status=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("");
            let ok = matches!(
                status.to_ascii_lowercase().as_str(),
                "0" | "0x0" | "0x0000" | "ok" | "success"
            );
            if !ok {
                errors += v as u64;
            }
        } else if name.starts_with("fabricd_sa_malformed_total") {
            malformed += v as u64;
        }
    }
    (errors, malformed)
}

/// Hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether `text` names the port GUID `g` (as a GID, as `0x<16 hex>`, or as the GID's 32 hex
/// digits).
pub fn names_port(text: &str, g: Guid) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains(&gid(PREFIX, g)) || t.contains(&format!("{g:016x}")) || t.contains(&format!("{PREFIX:016x}{g:016x}"))
}

/// Stdout of a command that must succeed.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}
