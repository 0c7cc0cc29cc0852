//! PathRecords (IBA 15.2.5.16) and MultiPathRecords (15.2.5.20) computed by walking the LFTs
//! installed on the switches ([`crate::Subnet`]): the links crossed ([`walk()`]; HopLimit stays
//! 0 inside the subnet, as OpenSM), the minimum MTU and rate along the path, packet lifetime,
//! SL (the escape SL for escape LIDs), reversibility, `num_path` over the LMC range.
//!
//! Layout: [`mod@walk`] (the hop-by-hop walk and the link parameters, `walk::Columns` for whole
//! tables), `record` (component masks, a MultiPathRecord request as a PathRecord template;
//! the images are the records module's), this module (the query: end points, LID pairs over the
//! LMC ranges, component mask and selectors, the answer).
//!
//! What OpenSM 3.3.23 (`osm_sa_path_record.c`, `osm_sa_multipath_record.c`) does and this
//! follows: see the "PathRecord" section of `docs/subnet-administration.md`.

mod record;
pub mod walk;

use record::{pr_mask, MultiPathRequest};

use crate::records::path::PathRecord;
use crate::records::{Gid, Record};

/// Bytes of a PathRecord (AttributeOffset 8).
pub const PATH_RECORD_SIZE: usize = 64;
pub use walk::{walk, PathWalk, WalkError};

use fabric_topology::Guid;

use crate::partitions::PkeyTables;
use crate::request::{error_response, response_header, Request, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, attr, status};
use walk::{end_port_live, lid_owner, rate_code_below, rate_mbps, Columns};

/// PacketLifeTime of every non-loopback path: OpenSM's default `subnet_timeout` (18, i.e.
/// 4.096 µs × 2^18 ≈ 1.07 s); a loopback path has 0.
pub const PACKET_LIFE_TIME: u8 = 18;
/// P_Key of every path when no partitions are set: the default partition, full member.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// Paths a GetMulti answers without NumbPath (OpenSM's `OSM_SA_MPR_MAX_NUM_PATH`).
pub const MULTI_PATH_DEFAULT_NUM: u32 = 127;
/// Most records one answer holds (256 MiB of PathRecords): a GetTable matching more is
/// answered ERR_NO_RESOURCES rather than held in memory (the whole-fabric table of 3 456 end
/// ports and 720 switches with LMC 1 is 58 million records, 3.7 GB). [`for_each_record`] has
/// no bound.
pub const MAX_TABLE_RECORDS: u32 = 4 << 20;
/// Selector "exactly" (the selector written in every answered MTU, rate and packet lifetime).
const SELECTOR_EXACTLY: u8 = 2;

/// The answer to a PathRecord (Get, GetTable) or MultiPathRecord (GetMulti) request with the
/// default P_Key tables (every port full member of 0xFFFF only).
pub fn answer(subnet: &Subnet, req: &Request<'_>) -> SaResponse {
    answer_in(subnet, PkeyTables::default(), req)
}

/// The answer to a PathRecord or MultiPathRecord request under the P_Key tables `pkeys`: a
/// path exists only between ports sharing a partition, one of them at least as a full member
/// (OpenSM's `pr_rcv_get_path_parms`): with P_Key in the mask, both ports must share that
/// one and it is answered as asked; otherwise the first P_Key they share is answered (OpenSM's
/// order, the source's entry). A raw-traffic path is not partitioned (P_Key 0).
pub fn answer_in(subnet: &Subnet, pkeys: PkeyTables<'_>, req: &Request<'_>) -> SaResponse {
    let h = &req.header;
    match (h.attr_id, h.method) {
        (attr::PATH_RECORD, wire::METHOD_GET | wire::METHOD_GET_TABLE) => {
            path_records_bounded(subnet, pkeys, req, MAX_TABLE_RECORDS)
        }
        (attr::MULTI_PATH_RECORD, wire::METHOD_GET_MULTI) => multi_path_records(subnet, pkeys, req),
        _ => error_response(h, req.data, status::UNSUPPORTED_METHOD_ATTR),
    }
}

/// Where the records of a query go, one 64-byte image at a time.
struct Out<'f> {
    count: u32,
    /// Stop after this many records (a Get: 1).
    limit: u32,
    sink: &'f mut dyn FnMut(&[u8; PATH_RECORD_SIZE]),
}

impl Out<'_> {
    fn full(&self) -> bool {
        self.count >= self.limit
    }
    fn push(&mut self, r: &PathRecord) {
        let mut b = [0u8; PATH_RECORD_SIZE];
        r.encode(&mut b);
        (self.sink)(&b);
        self.count += 1;
    }
}

/// The request's constraints: a PathRecord template and its component mask.
struct Query<'s> {
    subnet: &'s Subnet,
    pkeys: PkeyTables<'s>,
    t: PathRecord,
    mask: u64,
    /// Paths per (source, destination) port pair.
    per_pair: u32,
}

fn path_records_bounded(subnet: &Subnet, pkeys: PkeyTables<'_>, req: &Request<'_>, max: u32) -> SaResponse {
    let h = &req.header;
    let get = h.method == wire::METHOD_GET;
    let mut data = Vec::new();
    let mut sink = |b: &[u8; PATH_RECORD_SIZE]| data.extend_from_slice(b);
    let limit = if get { 1 } else { max.saturating_add(1) };
    match run(subnet, pkeys, req.data, h.component_mask, get, limit, &mut sink) {
        Ok(count) if count > max => error_response(h, req.data, status::NO_RESOURCES),
        Ok(count) => respond(h, data, count, get),
        Err(st) => error_response(h, req.data, st),
    }
}

/// Every PathRecord a GetTable with `template` (the 64-byte request image) under component
/// mask `mask` answers, handed to `f` one by one in the order of the answer, without holding
/// the table (what [`answer`] puts in its data). Returns the number of records, or the MAD
/// status of an invalid request.
pub fn for_each_record(
    subnet: &Subnet,
    template: &[u8],
    mask: u64,
    f: &mut dyn FnMut(&[u8; PATH_RECORD_SIZE]),
) -> Result<u32, u16> {
    run(subnet, PkeyTables::default(), template, mask, false, u32::MAX, f)
}

/// [`for_each_record`] under the P_Key tables `pkeys` (see [`answer_in`]).
pub fn for_each_record_in(
    subnet: &Subnet,
    pkeys: PkeyTables<'_>,
    template: &[u8],
    mask: u64,
    f: &mut dyn FnMut(&[u8; PATH_RECORD_SIZE]),
) -> Result<u32, u16> {
    run(subnet, pkeys, template, mask, false, u32::MAX, f)
}

fn run(
    subnet: &Subnet,
    pkeys: PkeyTables<'_>,
    template: &[u8],
    mask: u64,
    get: bool,
    limit: u32,
    sink: &mut dyn FnMut(&[u8; PATH_RECORD_SIZE]),
) -> Result<u32, u16> {
    let t = PathRecord::decode(template).map_err(|_| status::REQ_INVALID)?;
    let per_pair = if get {
        1 // IBA 1.2 erratum, as OpenSM: a Get asks for one path.
    } else if mask & pr_mask::NUMB_PATH != 0 {
        u32::from(t.num_path)
    } else {
        u32::MAX
    };
    let q = Query {
        subnet,
        pkeys,
        t,
        mask,
        per_pair,
    };
    let src = q.end_point(pr_mask::SGID, pr_mask::SLID, t.sgid.0, t.slid, true)?;
    let dst = q.end_point(pr_mask::DGID, pr_mask::DLID, t.dgid.0, t.dlid, false)?;
    let mut out = Out { count: 0, limit, sink };
    match (src, dst) {
        (EndPoint::Multicast, _) | (_, EndPoint::Multicast) => {}
        (EndPoint::Port(s), EndPoint::Port(d)) => q.pair(&mut Direct, s, d, &mut out),
        (EndPoint::Port(s), EndPoint::Any) => q.one_to_all(s, true, &mut out),
        (EndPoint::Any, EndPoint::Port(d)) => q.one_to_all(d, false, &mut out),
        (EndPoint::Any, EndPoint::Any) => q.world(&mut out),
    }
    Ok(out.count)
}

fn respond(h: &wire::SaHeader, data: Vec<u8>, count: u32, get: bool) -> SaResponse {
    let mut header = response_header(h);
    header.attr_id = attr::PATH_RECORD;
    header.attr_offset = (PATH_RECORD_SIZE / 8) as u16;
    if get && count == 0 {
        header.status = status::NO_RECORDS;
    }
    SaResponse { header, data }
}

fn multi_path_records(subnet: &Subnet, pkeys: PkeyTables<'_>, req: &Request<'_>) -> SaResponse {
    let h = &req.header;
    let r = match MultiPathRequest::decode(req.data, h.component_mask) {
        Ok(r) => r,
        Err(_) => return error_response(h, req.data, status::REQ_INVALID),
    };
    let q = Query {
        subnet,
        pkeys,
        t: r.template,
        mask: r.pr_mask,
        per_pair: u32::MAX,
    };
    let resolve = |gids: &[Gid], source: bool| -> Result<Vec<u32>, u16> {
        gids.iter()
            .map(|g| match q.gid_port(&g.0, source) {
                Ok(EndPoint::Port(p)) => Ok(p),
                Ok(_) => Err(status::INVALID_GID),
                Err(st) => Err(st),
            })
            .collect()
    };
    let (srcs, dsts) = match (resolve(&r.sgids, true), resolve(&r.dgids, false)) {
        (Ok(s), Ok(d)) => (s, d),
        (Err(st), _) | (_, Err(st)) => return error_response(h, req.data, st),
    };
    let limit = if r.pr_mask & pr_mask::NUMB_PATH != 0 {
        u32::from(r.template.num_path)
    } else {
        MULTI_PATH_DEFAULT_NUM
    };
    let mut data = Vec::new();
    let mut sink = |b: &[u8; PATH_RECORD_SIZE]| data.extend_from_slice(b);
    let mut out = Out {
        count: 0,
        limit,
        sink: &mut sink,
    };
    if srcs.len() == 2 && dsts.len() == 2 && r.template.num_path == 2 {
        q.apm(&srcs, &dsts, &mut out);
    } else {
        'pairs: for &s in &srcs {
            for &d in &dsts {
                if out.full() {
                    break 'pairs;
                }
                q.pair(&mut Direct, s, d, &mut out);
            }
        }
    }
    let count = out.count;
    respond(h, data, count, false)
}

/// One end of the requested paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndPoint {
    /// Every end port.
    Any,
    /// This end port (index into [`Subnet::ports`]).
    Port(u32),
    /// A multicast DGID: paths to multicast groups are not answered here.
    Multicast,
}

/// End ports (CA ports and switch ports 0 with a LID) in the order OpenSM iterates them: its
/// port map is keyed by the GUID in network byte order compared as a host integer, which on
/// little-endian hosts is the order of the byte-reversed GUID (0x0002c90000000000 before
/// 0x0002c90100000000 before 0x0002c90000000001, as `saquery -p` from OpenSM 3.3.23 shows).
fn end_ports_by_guid(subnet: &Subnet) -> Vec<u32> {
    let mut v: Vec<(Guid, u32)> = subnet
        .ports
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.lid() != 0
                && subnet
                    .nodes
                    .get(p.node as usize)
                    .is_some_and(|n| !n.is_switch() || p.port_num == 0)
        })
        .map(|(i, p)| (p.guid.swap_bytes(), i as u32))
        .collect();
    v.sort_unstable();
    v.into_iter().map(|(_, i)| i).collect()
}

/// How the walks of a query are computed.
trait Walker {
    fn walk(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> Option<PathWalk>;
    /// Whether the walk delivers (the reverse walk of a path).
    fn delivers(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> bool {
        self.walk(subnet, src, dlid).is_some()
    }
    /// Whether an end port can send or receive at all.
    fn live(&self, subnet: &Subnet, port: u32) -> bool {
        end_port_live(subnet, port)
    }
}

/// One walk per question (a few pairs).
struct Direct;

impl Walker for Direct {
    fn walk(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> Option<PathWalk> {
        walk(subnet, src, dlid).ok()
    }
}

impl Walker for Columns {
    fn walk(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> Option<PathWalk> {
        Columns::walk(self, subnet, src, dlid)
    }
    fn delivers(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> bool {
        Columns::delivers(self, subnet, src, dlid)
    }
    fn live(&self, _: &Subnet, port: u32) -> bool {
        Columns::live(self, port)
    }
}

/// The walks of a table with one end fixed: the walks towards the fixed end's LIDs from the
/// columns of those few LIDs, the others walked directly.
struct Half {
    columns: Columns,
    /// The fixed end is the destination (else the source).
    forward_by_columns: bool,
}

impl Walker for Half {
    fn walk(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> Option<PathWalk> {
        if self.forward_by_columns {
            self.columns.walk(subnet, src, dlid)
        } else {
            walk(subnet, src, dlid).ok()
        }
    }
    fn delivers(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> bool {
        if self.forward_by_columns {
            walk(subnet, src, dlid).is_ok()
        } else {
            self.columns.walk(subnet, src, dlid).is_some()
        }
    }
    fn live(&self, _: &Subnet, port: u32) -> bool {
        self.columns.live(port)
    }
}

/// Whether a GID prefix is this subnet's (or link-local, fe80::/10).
fn local_prefix(subnet: &Subnet, prefix: u64) -> bool {
    prefix == subnet.subnet_prefix || (prefix >> 54) == (0xfe80 >> 6)
}

impl Query<'_> {
    /// Resolves one end point the way OpenSM does: a GID off this subnet or of no port is
    /// ERR_REQ_INVALID_GID; a LID of no port is ERR_NO_RECORDS.
    fn end_point(&self, gid_bit: u64, lid_bit: u64, gid: [u8; 16], lid: u16, source: bool) -> Result<EndPoint, u16> {
        if self.mask & gid_bit != 0 {
            return self.gid_port(&gid, source);
        }
        if self.mask & lid_bit != 0 {
            return lid_owner(self.subnet, lid)
                .map(EndPoint::Port)
                .ok_or(status::NO_RECORDS);
        }
        Ok(EndPoint::Any)
    }

    fn gid_port(&self, gid: &[u8; 16], source: bool) -> Result<EndPoint, u16> {
        if gid[0] == 0xff {
            return if source {
                Err(status::INVALID_GID)
            } else {
                Ok(EndPoint::Multicast)
            };
        }
        let prefix = u64::from_be_bytes(gid[..8].try_into().unwrap_or_default());
        if !local_prefix(self.subnet, prefix) {
            // Off-subnet: no router is known.
            return Err(status::INVALID_GID);
        }
        let guid = u64::from_be_bytes(gid[8..].try_into().unwrap_or_default());
        self.subnet
            .port_index_by_guid(guid)
            .map(EndPoint::Port)
            .ok_or(status::INVALID_GID)
    }

    /// Every (source, destination) pair of end ports in OpenSM's port order (destination
    /// outer), over walk columns computed once for the whole table.
    /// The paths between end port `p` and every end port (in GUID order): from `p` when
    /// `from_p`, to `p` otherwise. Every walk goes to LIDs of the same port (the source's for
    /// the reverse walks, the destination's for the forward ones): their columns serve them all.
    fn one_to_all(&self, p: u32, from_p: bool, out: &mut Out) {
        let mut w = Half {
            columns: Columns::new(self.subnet),
            forward_by_columns: !from_p,
        };
        for o in end_ports_by_guid(self.subnet) {
            let (s, d) = if from_p { (p, o) } else { (o, p) };
            self.pair(&mut w, s, d, out);
            if out.full() {
                break;
            }
        }
    }

    fn world(&self, out: &mut Out) {
        let ports = end_ports_by_guid(self.subnet);
        if out.limit == 1 {
            // A Get wants the first path: direct walks, no columns.
            return self.pairs(&mut Direct, &ports, out);
        }
        let mut columns = Columns::new(self.subnet);
        columns.fill_all(self.subnet);
        self.pairs(&mut columns, &ports, out);
    }

    fn pairs(&self, w: &mut impl Walker, ports: &[u32], out: &mut Out) {
        for &d in ports {
            for &s in ports {
                self.pair(w, s, d, out);
                if out.full() {
                    return;
                }
            }
        }
    }

    /// The LIDs of end port `p` a query allows: the whole LMC range, or the one given.
    fn lid_range(&self, p: u32, lid_bit: u64, lid: u16) -> Option<(u16, u16)> {
        let port = &self.subnet.ports[p as usize];
        let base = port.lid();
        if base == 0 {
            return None;
        }
        // The LMC range, cut at the end of the LID space (an image may say anything).
        let n = (1u32 << port.lmc()).min(0x1_0000 - u32::from(base)) as u16;
        if self.mask & lid_bit != 0 {
            return (lid >= base && lid - base < n).then_some((lid, 1));
        }
        Some((base, n))
    }

    /// The paths from end port `s` to end port `d` (OpenSM's order: the LID pairs at equal
    /// offsets first, preference 0; then the others, preference 2), at most `per_pair`.
    fn pair(&self, w: &mut impl Walker, s: u32, d: u32, out: &mut Out) {
        if self.per_pair == 0 || !w.live(self.subnet, s) || !w.live(self.subnet, d) {
            return;
        }
        let Some((s0, ns)) = self.lid_range(s, pr_mask::SLID, self.t.slid) else {
            return;
        };
        let Some((d0, nd)) = self.lid_range(d, pr_mask::DLID, self.t.dlid) else {
            return;
        };
        // Across a partition boundary: no path, and no walk either.
        let Some(pkey) = self.path_pkey(s, d) else {
            return;
        };
        let mut found = 0u32;
        for i in 0..ns.min(nd) {
            if found >= self.per_pair || out.full() {
                return;
            }
            found += u32::from(self.lid_pair(w, (s, d, pkey), s0 + i, d0 + i, 0, out));
        }
        for so in 0..ns {
            for dof in 0..nd {
                if so == dof {
                    continue;
                }
                if found >= self.per_pair || out.full() {
                    return;
                }
                found += u32::from(self.lid_pair(w, (s, d, pkey), s0 + so, d0 + dof, 2, out));
            }
        }
    }

    /// The P_Key of the paths between end ports `s` and `d` ([`answer_in`]): 0 for raw
    /// traffic, the asked one when both share it, else the first they share; `None`: no path.
    fn path_pkey(&self, s: u32, d: u32) -> Option<u16> {
        let (m, t) = (self.mask, &self.t);
        if m & pr_mask::RAW_TRAFFIC != 0 && t.raw_traffic {
            return Some(0);
        }
        let (sg, dg) = (self.subnet.ports[s as usize].guid, self.subnet.ports[d as usize].guid);
        if m & pr_mask::PKEY != 0 {
            return self.pkeys.share_this_pkey(sg, dg, t.pkey).then_some(t.pkey);
        }
        self.pkeys.common_pkey(sg, dg)
    }

    /// One path from `slid` (of end port `s`) to `dlid` (of end port `d`) with P_Key `pkey`
    /// (`(s, d, pkey)`), if the tables deliver it and it meets the query; written to `out`.
    fn lid_pair(
        &self,
        w: &mut impl Walker,
        (s, d, pkey): (u32, u32, u16),
        slid: u16,
        dlid: u16,
        preference: u8,
        out: &mut Out,
    ) -> bool {
        match self.lid_path(w, (s, d, pkey), slid, dlid, preference) {
            Some((r, _)) => {
                out.push(&r);
                true
            }
            None => false,
        }
    }

    /// The record of one path and the links it crosses (see [`Query::lid_pair`]).
    fn lid_path(
        &self,
        w: &mut impl Walker,
        (s, d, pkey): (u32, u32, u16),
        slid: u16,
        dlid: u16,
        preference: u8,
    ) -> Option<(PathRecord, u8)> {
        let subnet = self.subnet;
        let fwd = w.walk(subnet, s, dlid)?;
        let reversible = w.delivers(subnet, d, slid);
        let (m, t) = (self.mask, &self.t);
        if m & pr_mask::REVERSIBLE != 0 && t.reversible && !reversible {
            return None;
        }
        let sl = path_sl(subnet, s, d, dlid);
        if m & pr_mask::SL != 0 && t.sl != sl {
            return None;
        }
        if m & pr_mask::QOS_CLASS != 0 && t.qos_class != 0 {
            return None;
        }
        if m & pr_mask::PREFERENCE != 0 && t.preference != preference {
            return None;
        }
        let raw = m & pr_mask::RAW_TRAFFIC != 0 && t.raw_traffic;
        let sp = &subnet.ports[s as usize];
        let dp = &subnet.ports[d as usize];
        let loopback = s == d;
        let mtu = self.select_mtu(fwd.mtu)?;
        let rate = self.select_rate(fwd.rate)?;
        let pkt_life = self.select_pkt_life(if loopback { 0 } else { PACKET_LIFE_TIME })?;
        let r = PathRecord {
            // ServiceID, FlowLabel, HopLimit and TClass select no path: answered 0 even when in
            // the mask, as OpenSM (a HopLimit > 1 would make clients add a GRH).
            service_id: 0,
            dgid: Gid::new(subnet.subnet_prefix, dp.guid),
            sgid: Gid::new(subnet.subnet_prefix, sp.guid),
            dlid,
            slid,
            raw_traffic: raw,
            flow_label: 0,
            hop_limit: 0,
            tclass: 0,
            reversible,
            num_path: 0,
            pkey,
            qos_class: 0,
            sl,
            mtu_selector: SELECTOR_EXACTLY,
            mtu,
            rate_selector: SELECTOR_EXACTLY,
            rate,
            pkt_life_selector: SELECTOR_EXACTLY,
            pkt_life,
            preference,
        };
        Some((r, fwd.links))
    }

    /// Automatic path migration (OpenSM's GetMulti with 2 SGIDs, 2 DGIDs and NumbPath 2): one
    /// path per (source, destination) pair starting at hashed LID offsets (the second source
    /// one offset further, so that the two paths use different LIDs of the LMC ranges), then
    /// the diagonal, {S0→D0, S1→D1} or {S0→D1, S1→D0} (sources and destinations in GUID order),
    /// whose shorter path is shorter (the first on a tie); a missing path loses.
    fn apm(&self, srcs: &[u32], dsts: &[u32], out: &mut Out) {
        let ports = &self.subnet.ports;
        let by_guid = |a: u32, b: u32| {
            if ports[a as usize].guid <= ports[b as usize].guid {
                [a, b]
            } else {
                [b, a]
            }
        };
        let (s, d) = (by_guid(srcs[0], srcs[1]), by_guid(dsts[0], dsts[1]));
        let (sl, dl) = (ports[s[0] as usize].lid(), ports[d[0] as usize].lid());
        let lmc = ports[s[0] as usize].lmc();
        let hash = |a: u16, b: u16| ((u32::from(a >> lmc) << 4) | u32::from(b >> lmc)) % 103;
        let base = if sl < dl { hash(sl, dl) } else { hash(dl, sl) };
        let m = [
            [self.apm_pair(s[0], d[0], base), self.apm_pair(s[0], d[1], base)],
            [self.apm_pair(s[1], d[0], base + 1), self.apm_pair(s[1], d[1], base + 1)],
        ];
        let shorter = |a: &Option<(PathRecord, u8)>, b: &Option<(PathRecord, u8)>| match (a, b) {
            (Some((_, x)), Some((_, y))) => Some(*x.min(y)),
            _ => None,
        };
        let (min_a, min_b) = (shorter(&m[0][0], &m[1][1]), shorter(&m[0][1], &m[1][0]));
        let diagonal_a = match (min_a, min_b) {
            (Some(a), Some(b)) => a <= b,
            (None, Some(_)) => false,
            _ => true,
        };
        let pick = if diagonal_a {
            [&m[0][0], &m[1][1]]
        } else {
            [&m[0][1], &m[1][0]]
        };
        for (r, _) in pick.into_iter().flatten() {
            if !out.full() {
                out.push(r);
            }
        }
    }

    /// The first path from `s` to `d` over the LMC ranges, starting at offset `offs` of each.
    fn apm_pair(&self, s: u32, d: u32, offs: u32) -> Option<(PathRecord, u8)> {
        if !end_port_live(self.subnet, s) || !end_port_live(self.subnet, d) {
            return None;
        }
        let (s0, ns) = self.lid_range(s, 0, 0)?;
        let (d0, nd) = self.lid_range(d, 0, 0)?;
        let pkey = self.path_pkey(s, d)?;
        let (so, dof) = (offs % u32::from(ns), offs % u32::from(nd));
        (0..u32::from(ns.min(nd))).find_map(|i| {
            let slid = s0 + ((so + i) % u32::from(ns)) as u16;
            let dlid = d0 + ((dof + i) % u32::from(nd)) as u16;
            self.lid_path(&mut Direct, (s, d, pkey), slid, dlid, 0)
        })
    }

    /// The MTU under the request's MTUSelector (OpenSM's semantics: `>` filters, `<` lowers
    /// to just below the asked value, `=` lowers to it, "largest" takes the path's).
    fn select_mtu(&self, mtu: u8) -> Option<u8> {
        let on = self.mask & pr_mask::MTU_SELECTOR != 0 && self.mask & pr_mask::MTU != 0;
        select_code(on, self.t.mtu_selector, self.t.mtu, mtu)
    }

    /// The rate under the RateSelector (compared in Gb/s: rate codes are not ordered).
    fn select_rate(&self, rate: u8) -> Option<u8> {
        if self.mask & pr_mask::RATE_SELECTOR == 0 || self.mask & pr_mask::RATE == 0 {
            return Some(rate);
        }
        let want = self.t.rate;
        let (have, asked) = (rate_mbps(rate), rate_mbps(want));
        match self.t.rate_selector {
            0 => (have > asked).then_some(rate),
            1 if have < asked => Some(rate),
            1 => rate_code_below(want),
            2 => (asked != 0 && have >= asked).then_some(want),
            _ => Some(rate),
        }
    }

    /// The packet lifetime under the PacketLifeTimeSelector (3: "smallest available").
    fn select_pkt_life(&self, life: u8) -> Option<u8> {
        let on = self.mask & pr_mask::PKT_LIFE_SELECTOR != 0 && self.mask & pr_mask::PKT_LIFE != 0;
        select_code(on, self.t.pkt_life_selector, self.t.pkt_life, life)
    }
}

/// A numerically ordered code (MTU, PacketLifeTime) `have` of a path under `selector` and the
/// asked value `want` when both components are in the mask (`on`), as OpenSM does: 0 (`>`)
/// filters, 1 (`<`) keeps a smaller one or lowers to just below `want`, 2 (`=`) lowers to
/// `want`, 3 ("largest" / "smallest available") takes the path's.
fn select_code(on: bool, selector: u8, want: u8, have: u8) -> Option<u8> {
    if !on {
        return Some(have);
    }
    match selector {
        0 => (have > want).then_some(have),
        1 if have < want => Some(have),
        1 => (want > 1).then(|| want - 1),
        2 => (have >= want).then_some(want),
        _ => Some(have),
    }
}

/// The SL of the path from end port `s` (index in [`Subnet::ports`]) to `dlid` of end port
/// `d`: the escape SL for an escape LID (LMC ≥ 1, offset 1); otherwise, with
/// [`Subnet::path_sls`] (a routing layered over several VLs, seed 003 §5.2), the SL of the
/// route from the path's first switch (the source CA's neighbour switch, or the source switch
/// itself for a switch port 0) to `dlid`; 0 when not covered.
pub fn path_sl(subnet: &Subnet, s: u32, d: u32, dlid: u16) -> u8 {
    let dp = &subnet.ports[d as usize];
    if let Some(e) = subnet
        .escape
        .filter(|_| dp.lmc() >= 1 && dlid.checked_sub(dp.lid()) == Some((1u16 << dp.lmc().min(7)) - 1))
    {
        return e.sl;
    }
    let Some(sls) = subnet.path_sls.as_deref() else {
        return 0;
    };
    let sp = &subnet.ports[s as usize];
    let node = &subnet.nodes[sp.node as usize];
    let first = if node.is_switch() {
        Some(node.guid())
    } else {
        sp.peer
            .and_then(|(n, _)| subnet.nodes.get(n as usize))
            .filter(|n| n.is_switch())
            .map(crate::subnet::Node::guid)
    };
    first.and_then(|g| sls.sl(g, dlid)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subnet::{from_model, SmData};
    use crate::Requester;
    use fabric_routing::{assign_lids, Guid2Lid, Lfts, IB_MAX_UNICAST_LID};
    use fabric_topology::gen::generate_str;

    #[test]
    fn a_table_beyond_the_bound_is_answered_no_resources() {
        // One leaf, tables routing every LID: 4 CAs + the switch, LMC 1.
        let f = generate_str("PGFT(1;4;1;1)", None).unwrap();
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let mut lfts = Lfts::new(1, lids.top());
        let sw = fabric_topology::SwitchId(0);
        lfts.set(sw, lids.switch_lid[0], 0);
        for e in f.end_port_ids() {
            let (_, port) = f.end_port(e).attach.unwrap();
            lfts.set(sw, lids.base_lid(e), port);
            lfts.set(sw, lids.base_lid(e) + 1, port);
        }
        let s = from_model(&f, &lids, &lfts, SmData::default(), None);
        let h = wire::SaHeader {
            class_version: 2,
            method: wire::METHOD_GET_TABLE,
            attr_id: attr::PATH_RECORD,
            ..Default::default()
        };
        let data = [0u8; 64];
        let req = Request {
            header: h,
            data: &data,
            from: Requester::default(),
            now: std::time::SystemTime::UNIX_EPOCH,
            trusted: false,
        };
        // 4 CAs: 16 pairs x 4 LID pairs; the switch: 1 + 2 x 4 x 2.
        let all = path_records_bounded(&s, PkeyTables::default(), &req, MAX_TABLE_RECORDS);
        assert_eq!((all.header.status, all.data.len() / 64), (0, 64 + 17));
        let at = path_records_bounded(&s, PkeyTables::default(), &req, 81);
        assert_eq!((at.header.status, at.data.len()), (0, 81 * 64));
        let over = path_records_bounded(&s, PkeyTables::default(), &req, 80);
        assert_eq!(over.header.status, status::NO_RESOURCES);
    }
}
