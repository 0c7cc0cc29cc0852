//! Multicast joins and leaves from an end node: `fabric-saquery join`, `leave` and
//! `mcast-cycles` (SubnAdmSet / SubnAdmDelete of an MCMemberRecord, IBA 15.2.5.17).
//!
//! * `join --mgid G [--port-gid G].. [--join-state S] [--create] [--qkey ..] ..`: one Set per
//!   port GID (default: this port's own GID; another port's GID is a proxy join, which
//!   fabricd allows a trusted requester only: `--sm-key`). MGID, PortGID, JoinState and P_Key
//!   (default 0xffff) are always in the component mask; `--create` adds the components a join
//!   that creates its group needs (Q_Key, TClass, FlowLabel, SL, with the defaults below);
//!   every other field goes in the mask when given. A selector given without its value (or
//!   the reverse) is sent with the other as "exactly" / 0.
//! * `leave --mgid G [--port-gid G].. [--join-state S]`: one Delete per port GID.
//! * `mcast-cycles --count N ..`: N join/leave round trips of one member in one process (the
//!   join as `join`, then a leave of `--leave-state`, default the join state), with
//!   `--fresh-mgid` a new MGID per cycle (the counter in the MGID's last 4 bytes). Prints one
//!   JSON document: statuses, latencies (p50/p99 of joins, leaves, cycles), the distinct MLIDs
//!   the joins were answered with.
//!
//! JoinState: `full` (FullMember, 0x1), `non` (NonMember, 0x2), `send-only` (SendOnlyNonMember,
//! 0x4), `send-only-full` (SendOnlyFullMember, 0x8), several joined with `+`, or a number.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use fabric_sa::records::mc_member::comp;
use fabric_sa::records::{Gid, McMemberRecord, Record};
use fabric_sa::wire::{attr, status, METHOD_DELETE, METHOD_SET};
use fabric_umad::client::{SaAnswer, SaClient, SaQuery};
use serde_json::{json, Value};

use super::templates::{parse_gid, parse_u64};

/// IPoIB's Q_Key (OpenSM's default for the groups it creates), the default of a create.
pub const DEFAULT_QKEY: u32 = 0x0000_0b1b;

/// The member of a join or leave.
#[derive(Args, Debug, Clone)]
pub struct MemberArgs {
    /// MGID: IPv6 text (`ff12:401b:ffff::ffff:ffff`) or 32 hex digits; `::` (all zeros) asks
    /// the SA to assign one (create only).
    #[arg(long)]
    pub mgid: String,
    /// Port GID of the member; repeat for several (one request each). Default: this port's
    /// GID. Another port's GID is a proxy join (fabricd: trusted requesters only, `--sm-key`).
    #[arg(long = "port-gid")]
    pub port_gids: Vec<String>,
    /// JoinState: full, non, send-only, send-only-full, several joined with `+`, or a number.
    #[arg(long, default_value = "full")]
    pub join_state: String,
    /// P_Key (always in the mask).
    #[arg(long, default_value = "0xffff")]
    pub pkey: String,
    /// SM_Key carried by the requests (the manager's key makes the requester trusted).
    #[arg(long)]
    pub sm_key: Option<String>,
}

/// `join`: the member and the group's fields.
#[derive(Args, Debug, Clone)]
pub struct JoinArgs {
    #[command(flatten)]
    pub member: MemberArgs,
    /// Send the components a create needs (Q_Key, TClass, FlowLabel, SL) with their values
    /// (defaults: Q_Key 0x0b1b, 0, 0, 0).
    #[arg(long)]
    pub create: bool,
    /// Q_Key.
    #[arg(long)]
    pub qkey: Option<String>,
    /// TClass.
    #[arg(long)]
    pub tclass: Option<u8>,
    /// FlowLabel (20 bits).
    #[arg(long)]
    pub flow_label: Option<u32>,
    /// SL (4 bits).
    #[arg(long)]
    pub sl: Option<u8>,
    /// MTU code (1 = 256 .. 5 = 4096).
    #[arg(long)]
    pub mtu: Option<u8>,
    /// MTU selector (0 greater than, 1 less than, 2 exactly, 3 largest).
    #[arg(long)]
    pub mtu_selector: Option<u8>,
    /// Rate code (IBA table 220: 2 = 2.5, 3 = 10, 6 = 20, 7 = 40 Gb/s ...).
    #[arg(long)]
    pub rate: Option<u8>,
    /// Rate selector (as the MTU selector).
    #[arg(long)]
    pub rate_selector: Option<u8>,
    /// HopLimit.
    #[arg(long)]
    pub hop_limit: Option<u8>,
    /// Scope (4 bits; only used by the SA when it assigns the MGID).
    #[arg(long)]
    pub scope: Option<u8>,
}

/// `mcast-cycles`.
#[derive(Args, Debug, Clone)]
pub struct CyclesArgs {
    #[command(flatten)]
    pub join: JoinArgs,
    /// Join/leave round trips.
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    /// JoinState left (a partial leave when it is a part of the join state). Default: all of
    /// the join state.
    #[arg(long)]
    pub leave_state: Option<String>,
    /// A new MGID each cycle: the MGID with the cycle number added to its last 4 bytes.
    #[arg(long)]
    pub fresh_mgid: bool,
    /// Stop at the first join or leave answered with an error status.
    #[arg(long)]
    pub stop_on_error: bool,
}

/// A JoinState argument as its 4 bits.
pub fn parse_join_state(s: &str) -> Result<u8> {
    let mut bits = 0u8;
    for part in s.split('+') {
        bits |= match part.trim() {
            "full" => 0x1,
            "non" => 0x2,
            "send-only" | "send-only-non" => 0x4,
            "send-only-full" => 0x8,
            n => {
                let v = parse_u64(n).with_context(|| {
                    format!("join state {n:?}: full, non, send-only, send-only-full, joined with +, or a number")
                })?;
                u8::try_from(v)
                    .ok()
                    .filter(|v| *v <= 0x0f)
                    .with_context(|| format!("join state {n} does not fit the 4 JoinState bits"))?
            }
        };
    }
    if bits == 0 {
        bail!("join state {s:?} is empty (0): a join or leave needs at least one bit");
    }
    Ok(bits)
}

fn num<T: TryFrom<u64>>(what: &str, s: &str) -> Result<T> {
    T::try_from(parse_u64(s)?).map_err(|_| anyhow::anyhow!("--{what} {s} is out of range"))
}

/// An MCMemberRecord request: the record and its component mask.
#[derive(Clone, Debug)]
pub struct Request {
    pub rec: McMemberRecord,
    pub mask: u64,
    pub sm_key: u64,
}

impl Request {
    /// The SA query of a join (`Set`) or a leave (`Delete`).
    pub fn query(&self, method: u8) -> SaQuery {
        let mut data = vec![0u8; McMemberRecord::SIZE];
        self.rec.encode(&mut data);
        SaQuery {
            method,
            attr_id: attr::MC_MEMBER_RECORD,
            component_mask: self.mask,
            sm_key: self.sm_key,
            data,
            ..SaQuery::default()
        }
    }
}

/// The member part of a request (MGID, PortGID, JoinState, P_Key in the mask).
fn member_request(m: &MemberArgs, port_gid: [u8; 16], join_state: u8) -> Result<Request> {
    let rec = McMemberRecord {
        mgid: Gid(parse_gid(&m.mgid)?),
        port_gid: Gid(port_gid),
        pkey: num("pkey", &m.pkey)?,
        join_state,
        ..McMemberRecord::default()
    };
    let mask = 1 << comp::MGID | 1 << comp::PORT_GID | 1 << comp::JOIN_STATE | 1 << comp::PKEY;
    let sm_key = m.sm_key.as_deref().map(parse_u64).transpose()?.unwrap_or(0);
    Ok(Request { rec, mask, sm_key })
}

/// The join request of `a` for `port_gid`.
pub fn join_request(a: &JoinArgs, port_gid: [u8; 16]) -> Result<Request> {
    let mut r = member_request(&a.member, port_gid, parse_join_state(&a.member.join_state)?)?;
    let mut put = |bit: u32, given: bool| {
        if given || a.create && [comp::QKEY, comp::TCLASS, comp::FLOW_LABEL, comp::SL].contains(&bit) {
            r.mask |= 1 << bit;
        }
    };
    put(comp::QKEY, a.qkey.is_some());
    put(comp::TCLASS, a.tclass.is_some());
    put(comp::FLOW_LABEL, a.flow_label.is_some());
    put(comp::SL, a.sl.is_some());
    put(comp::HOP_LIMIT, a.hop_limit.is_some());
    put(comp::SCOPE, a.scope.is_some());
    let mtu = a.mtu.is_some() || a.mtu_selector.is_some();
    put(comp::MTU, mtu);
    put(comp::MTU_SELECTOR, mtu);
    let rate = a.rate.is_some() || a.rate_selector.is_some();
    put(comp::RATE, rate);
    put(comp::RATE_SELECTOR, rate);
    let rec = &mut r.rec;
    rec.qkey = a
        .qkey
        .as_deref()
        .map(|q| num("qkey", q))
        .transpose()?
        .unwrap_or(DEFAULT_QKEY);
    rec.tclass = a.tclass.unwrap_or(0);
    rec.flow_label = a.flow_label.unwrap_or(0);
    if rec.flow_label >= 1 << 20 {
        bail!("--flow-label {} does not fit 20 bits", rec.flow_label);
    }
    for (what, v, bits) in [
        ("sl", a.sl, 4),
        ("scope", a.scope, 4),
        ("mtu", a.mtu, 6),
        ("rate", a.rate, 6),
        ("mtu-selector", a.mtu_selector, 2),
        ("rate-selector", a.rate_selector, 2),
    ] {
        if v.is_some_and(|v| u32::from(v) >= 1 << bits) {
            bail!("--{what} {} does not fit {bits} bits", v.unwrap_or(0));
        }
    }
    rec.sl = a.sl.unwrap_or(0);
    rec.hop_limit = a.hop_limit.unwrap_or(0);
    rec.scope = a.scope.unwrap_or(0);
    rec.mtu = a.mtu.unwrap_or(0);
    rec.mtu_selector = a.mtu_selector.unwrap_or(2);
    rec.rate = a.rate.unwrap_or(0);
    rec.rate_selector = a.rate_selector.unwrap_or(2);
    Ok(r)
}

/// The leave request of `m` for `port_gid`.
pub fn leave_request(m: &MemberArgs, port_gid: [u8; 16]) -> Result<Request> {
    member_request(m, port_gid, parse_join_state(&m.join_state)?)
}

/// The default (link-local) GID prefix of IBA 4.1.1, `fe80::/64`.
pub const LINK_LOCAL_PREFIX: [u8; 8] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0];

/// This port's GID: GID 0 of sysfs, with the link-local prefix when its prefix is 0 (a port
/// whose PortInfo:GIDPrefix no manager wrote: ibsim starts ports with 0 where hardware has
/// `fe80::`, OpenSM writes its subnet prefix, fabricd writes none).
pub fn own_gid(sysfs_gid: [u8; 16]) -> [u8; 16] {
    let mut g = sysfs_gid;
    if g[..8] == [0; 8] {
        g[..8].copy_from_slice(&LINK_LOCAL_PREFIX);
    }
    g
}

/// The port GIDs of a command: those given, else this port's own ([`own_gid`]).
pub fn port_gids(c: &SaClient, m: &MemberArgs) -> Result<Vec<[u8; 16]>> {
    if m.port_gids.is_empty() {
        let own = c.local().gid.with_context(|| {
            format!(
                "no GID of port {} of {} in sysfs: give --port-gid",
                c.local().port,
                c.local().ca
            )
        })?;
        return Ok(vec![own_gid(own)]);
    }
    m.port_gids.iter().map(|g| parse_gid(g)).collect()
}

/// The MLID of a join's answer (the first record), if it carries one.
pub fn answered_mlid(a: &SaAnswer) -> Option<u16> {
    let r = a.records().into_iter().next()?;
    McMemberRecord::decode(r).ok().map(|r| r.mlid)
}

fn percentile_us(sorted: &[Duration], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_micros() as u64
}

fn latency_json(mut v: Vec<Duration>) -> Value {
    v.sort_unstable();
    json!({
        "n": v.len(),
        "p50_us": percentile_us(&v, 0.50),
        "p99_us": percentile_us(&v, 0.99),
        "max_us": v.last().map_or(0, |d| d.as_micros() as u64),
    })
}

/// The MGID of cycle `i` with `--fresh-mgid`: the cycle number added to the last 4 bytes.
pub fn fresh_mgid(base: [u8; 16], i: usize) -> [u8; 16] {
    let mut m = base;
    let low = u32::from_be_bytes([m[12], m[13], m[14], m[15]]).wrapping_add(i as u32);
    m[12..16].copy_from_slice(&low.to_be_bytes());
    m
}

/// Runs `mcast-cycles`; the JSON document of what happened.
pub fn cycles(c: &SaClient, a: &CyclesArgs) -> Result<Value> {
    let gids = port_gids(c, &a.join.member)?;
    let [gid] = gids.as_slice() else {
        bail!("mcast-cycles takes one member (at most one --port-gid)");
    };
    let join = join_request(&a.join, *gid)?;
    let leave_state = match &a.leave_state {
        Some(s) => parse_join_state(s)?,
        None => join.rec.join_state,
    };
    let mut leave = join.clone();
    leave.rec.join_state = leave_state;
    leave.mask = 1 << comp::MGID | 1 << comp::PORT_GID | 1 << comp::JOIN_STATE | 1 << comp::PKEY;
    let base = join.rec.mgid.0;
    let (mut join_lat, mut leave_lat, mut cycle_lat) = (Vec::new(), Vec::new(), Vec::new());
    let mut join_status: BTreeMap<String, u64> = BTreeMap::new();
    let mut leave_status: BTreeMap<String, u64> = BTreeMap::new();
    let mut mlids = BTreeSet::new();
    let mut first_error = Value::Null;
    let t0 = Instant::now();
    let mut done = 0;
    for i in 0..a.count {
        let (mut j, mut l) = (join.clone(), leave.clone());
        if a.fresh_mgid {
            j.rec.mgid = Gid(fresh_mgid(base, i));
            l.rec.mgid = j.rec.mgid;
        }
        let c0 = Instant::now();
        let ja = c
            .query(j.query(METHOD_SET))
            .with_context(|| format!("cycle {i}: join"))?;
        join_lat.push(c0.elapsed());
        *join_status.entry(format!("{:#06x}", ja.status())).or_default() += 1;
        if ja.status() == status::OK {
            if let Some(m) = answered_mlid(&ja) {
                mlids.insert(m);
            }
        } else if first_error.is_null() {
            first_error = json!({ "cycle": i, "request": "join", "status": ja.status() });
        }
        let l0 = Instant::now();
        let la = c
            .query(l.query(METHOD_DELETE))
            .with_context(|| format!("cycle {i}: leave"))?;
        leave_lat.push(l0.elapsed());
        cycle_lat.push(c0.elapsed());
        *leave_status.entry(format!("{:#06x}", la.status())).or_default() += 1;
        if la.status() != status::OK && first_error.is_null() {
            first_error = json!({ "cycle": i, "request": "leave", "status": la.status() });
        }
        done = i + 1;
        if a.stop_on_error && !first_error.is_null() {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(json!({
        "cycles": done,
        "join_state": join.rec.join_state,
        "leave_state": leave_state,
        "fresh_mgid": a.fresh_mgid,
        "join_statuses": join_status,
        "leave_statuses": leave_status,
        "first_error": first_error,
        "distinct_mlids": mlids.len(),
        "min_mlid": mlids.first().map(|m| format!("{m:#06x}")),
        "max_mlid": mlids.last().map(|m| format!("{m:#06x}")),
        "join": latency_json(join_lat),
        "leave": latency_json(leave_lat),
        "cycle": latency_json(cycle_lat),
        "seconds": secs,
        "cycles_per_s": if secs > 0.0 { done as f64 / secs } else { 0.0 },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(mgid: &str) -> MemberArgs {
        MemberArgs {
            mgid: mgid.into(),
            port_gids: vec![],
            join_state: "full".into(),
            pkey: "0xffff".into(),
            sm_key: None,
        }
    }

    fn join_args(mgid: &str) -> JoinArgs {
        JoinArgs {
            member: member(mgid),
            create: false,
            qkey: None,
            tclass: None,
            flow_label: None,
            sl: None,
            mtu: None,
            mtu_selector: None,
            rate: None,
            rate_selector: None,
            hop_limit: None,
            scope: None,
        }
    }

    #[test]
    fn join_states_parse_by_name_and_number() {
        assert_eq!(parse_join_state("full").unwrap(), 1);
        assert_eq!(parse_join_state("full+send-only").unwrap(), 5);
        assert_eq!(parse_join_state("send-only-full").unwrap(), 8);
        assert_eq!(parse_join_state("0x3").unwrap(), 3);
        assert!(parse_join_state("0").unwrap_err().to_string().contains("empty"));
        assert!(parse_join_state("16")
            .unwrap_err()
            .to_string()
            .contains("4 JoinState bits"));
        assert!(parse_join_state("member").is_err());
    }

    #[test]
    fn a_plain_join_sends_the_member_components_only() {
        let g = parse_gid("fe80::2:c980:0:1").unwrap();
        let r = join_request(&join_args("ff12:401b:ffff::ffff:ffff"), g).unwrap();
        let want = 1 << comp::MGID | 1 << comp::PORT_GID | 1 << comp::JOIN_STATE | 1 << comp::PKEY;
        assert_eq!(r.mask, want);
        let q = r.query(METHOD_SET);
        assert_eq!(
            (q.method, q.attr_id, q.data.len()),
            (METHOD_SET, attr::MC_MEMBER_RECORD, 56)
        );
        // IBA 15.2.5.17: MGID @0, PortGID @16, P_Key @40, JoinState low nibble of byte 48.
        assert_eq!(&q.data[0..4], &[0xff, 0x12, 0x40, 0x1b]);
        assert_eq!(&q.data[16..32], &g);
        assert_eq!(&q.data[40..42], &[0xff, 0xff]);
        assert_eq!(q.data[48] & 0x0f, 1);
    }

    #[test]
    fn a_create_carries_the_create_components_and_given_selectors() {
        let mut a = join_args("ff12:e01b::1");
        a.create = true;
        a.member.join_state = "full+send-only".into();
        a.mtu = Some(4);
        a.rate_selector = Some(3);
        let r = join_request(&a, [0; 16]).unwrap();
        for bit in [
            comp::QKEY,
            comp::TCLASS,
            comp::FLOW_LABEL,
            comp::SL,
            comp::MTU,
            comp::MTU_SELECTOR,
            comp::RATE,
            comp::RATE_SELECTOR,
        ] {
            assert!(r.mask & 1 << bit != 0, "component {bit}");
        }
        assert_eq!(r.mask & (1 << comp::HOP_LIMIT | 1 << comp::SCOPE), 0);
        let q = r.query(METHOD_SET);
        assert_eq!(&q.data[32..36], &DEFAULT_QKEY.to_be_bytes());
        // MTUSelector 2 (exactly) over MTU 4; RateSelector 3 over rate 0.
        assert_eq!(q.data[38], 2 << 6 | 4);
        assert_eq!(q.data[42], 3 << 6);
        assert_eq!(q.data[48] & 0x0f, 5);
        let mut bad = a.clone();
        bad.sl = Some(16);
        assert!(join_request(&bad, [0; 16]).unwrap_err().to_string().contains("--sl"));
    }

    #[test]
    fn an_unset_gid_prefix_becomes_link_local() {
        let g = parse_gid("::2:c980:0:801").unwrap();
        assert_eq!(own_gid(g), parse_gid("fe80::2:c980:0:801").unwrap());
        let site = parse_gid("fec0::2:c980:0:801").unwrap();
        assert_eq!(own_gid(site), site, "a prefix the manager wrote is kept");
    }

    #[test]
    fn fresh_mgids_count_in_the_last_four_bytes() {
        let base = parse_gid("ff12:e01b::ffff:fffe").unwrap();
        assert_eq!(fresh_mgid(base, 0), base);
        let m = fresh_mgid(base, 3);
        assert_eq!(&m[..12], &base[..12]);
        assert_eq!(&m[12..], &[0, 0, 0, 1], "wraps within the 4 bytes");
        assert_eq!(&fresh_mgid(base, 1)[12..], &[0xff, 0xff, 0xff, 0xff]);
    }
}
