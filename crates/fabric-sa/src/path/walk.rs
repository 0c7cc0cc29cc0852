//! Walking the installed LFTs ([`Subnet::lft`]) hop by hop from a source end port to a
//! destination LID, and the link parameters read from the PortInfo images on the way.
//!
//! A path exists when the walk reaches the end port owning the LID within [`MAX_LINKS`] links,
//! crossing only live links (a peer recorded and neither end in PortState Down). Its MTU is the
//! least, over both ends of every link crossed, of MTUCap and NeighborMTU (when set); its rate
//! the least of LinkWidthActive × LinkSpeed(Ext)Active. A switch's port 0 at either end of the
//! path also limits it (its MTUCap and rate, as OpenSM counts it: under ibsim port 0 reports
//! MTUCap 1024 and 4x SDR, so OpenSM answers 1024 / 10 Gb/s for every path to or from a
//! switch); a loopback path (source = destination) takes the source port's own MTU and rate.
//!
//! [`walk()`] is the direct walk (one query). `Columns` answers many queries at once: per
//! destination LID one entry per switch (links to the destination, least MTU and rate), each
//! switch resolved once from its next hop's entry, so a whole-fabric table costs one entry per
//! (switch, LID) and one lookup per record.

use fabric_topology::{fmt_guid, Guid};

use crate::subnet::{Node, Port, Subnet, NO_PORT};

/// Longest walk: links crossed (the 64 hops of a directed route).
pub const MAX_LINKS: u8 = 64;
/// MTU used when no image along the path has a valid one (256 bytes, what every port supports).
pub const FALLBACK_MTU: u8 = 1;
/// Rate used when no image along the path has a valid width and speed (2.5 Gb/s).
pub const FALLBACK_RATE: u8 = 2;

/// One path through the installed tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathWalk {
    /// Links crossed: 0 for loopback, 2 between two CAs on one leaf.
    pub links: u8,
    /// MTU code (1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// Rate code of the PathRecord (IBA table 205: 2 = 2.5, 3 = 10, 7 = 40, 12 = 56,
    /// 16 = 100, 17 = 200 Gb/s, ...).
    pub rate: u8,
}

/// Why a walk does not deliver.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WalkError {
    #[error("no end port owns LID {lid}")]
    UnknownLid { lid: u16 },
    #[error("port {} (port {port}) has no live link", fmt_guid(*.guid))]
    SourceNotLive { guid: Guid, port: u8 },
    #[error("switch {} has no route to LID {lid}", fmt_guid(*.guid))]
    NoRoute { guid: Guid, lid: u16 },
    #[error("switch {} routes LID {lid} to port {port}, which has no live link", fmt_guid(*.guid))]
    DeadPort { guid: Guid, port: u8, lid: u16 },
    #[error("LID {lid} is delivered to port {} (port {port}), which does not own it", fmt_guid(*.guid))]
    WrongPort { guid: Guid, port: u8, lid: u16 },
    #[error("the walk to LID {lid} takes more than {MAX_LINKS} links (a loop)")]
    TooLong { lid: u16 },
}

/// Rate codes (IBA table 205) → Mb/s; 0 for reserved codes.
const RATE_MBPS: [u32; 23] = [
    0, 0, 2_500, 10_000, 30_000, 5_000, 20_000, 40_000, 60_000, 80_000, 120_000, 14_000, 56_000, 112_000, 168_000,
    25_000, 100_000, 200_000, 300_000, 28_000, 50_000, 400_000, 600_000,
];

/// Mb/s of a rate code (0 for a reserved code).
pub fn rate_mbps(rate: u8) -> u32 {
    RATE_MBPS.get(usize::from(rate)).copied().unwrap_or(0)
}

/// The rate code of the greatest defined rate at most `mbps` (`None` below 2.5 Gb/s).
pub fn rate_code_at_most(mbps: u32) -> Option<u8> {
    (0..RATE_MBPS.len())
        .filter(|&c| RATE_MBPS[c] != 0 && RATE_MBPS[c] <= mbps)
        .max_by_key(|&c| RATE_MBPS[c])
        .map(|c| c as u8)
}

/// The rate code just below `rate` in bandwidth (`None` when `rate` is the slowest).
pub fn rate_code_below(rate: u8) -> Option<u8> {
    rate_code_at_most(rate_mbps(rate).checked_sub(1)?)
}

/// PortState (PortInfo byte 32, low nibble).
pub fn port_state(pi: &[u8; 64]) -> u8 {
    pi[32] & 0x0f
}

/// The MTU a port allows: MTUCap, lowered to NeighborMTU when that is set (`None`: no valid
/// value).
pub fn port_mtu(pi: &[u8; 64]) -> Option<u8> {
    let cap = pi[41] & 0x0f;
    let neighbor = pi[36] >> 4;
    let valid = |m: u8| (1..=5).contains(&m).then_some(m);
    match (valid(cap), valid(neighbor)) {
        (Some(c), Some(n)) => Some(c.min(n)),
        (c, n) => c.or(n),
    }
}

/// The rate code of a port: LinkWidthActive × the active lane speed (LinkSpeedExtActive when
/// set and LinkSpeedActive is QDR, as OpenSM reads it); `None` when width or speed is unset.
pub fn port_rate(pi: &[u8; 64]) -> Option<u8> {
    let lanes = match pi[31] {
        0x01 => 1,
        0x02 => 4,
        0x04 => 8,
        0x08 => 12,
        0x10 => 2,
        _ => return None,
    };
    let speed = pi[35] >> 4;
    let ext = pi[62] >> 4;
    let lane = match (speed, ext) {
        (4, 1) => 14_000,
        (4, 2) => 25_000,
        (4, 4) => 50_000,
        (4, 8) => 100_000,
        (1, _) => 2_500,
        (2, _) => 5_000,
        (4, _) => 10_000,
        _ => return None,
    };
    rate_code_at_most(lanes * lane)
}

/// Least MTU and rate along links; `u8::MAX` until a link gives a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Least {
    pub mtu: u8,
    pub rate: u8,
}

impl Least {
    pub const NONE: Least = Least {
        mtu: u8::MAX,
        rate: u8::MAX,
    };

    /// Adds one port's limits.
    pub fn port(self, p: &Port) -> Least {
        let mut l = self;
        if let Some(m) = port_mtu(&p.port_info) {
            l.mtu = l.mtu.min(m);
        }
        if let Some(r) = port_rate(&p.port_info) {
            if l.rate == u8::MAX || rate_mbps(r) < rate_mbps(l.rate) {
                l.rate = r;
            }
        }
        l
    }

    /// A switch's port 0 at an end of the path: MTUCap (its NeighborMTU is meaningless) and
    /// rate.
    pub fn port_zero(self, p: &Port) -> Least {
        let mut l = self;
        let cap = p.port_info[41] & 0x0f;
        if (1..=5).contains(&cap) {
            l.mtu = l.mtu.min(cap);
        }
        if let Some(r) = port_rate(&p.port_info) {
            l = l.and(Least { mtu: u8::MAX, rate: r });
        }
        l
    }

    /// Both ends of a link.
    pub fn link(self, a: &Port, b: &Port) -> Least {
        self.port(a).port(b)
    }

    /// Combines two partial results.
    pub fn and(self, o: Least) -> Least {
        let rate = match (self.rate, o.rate) {
            (u8::MAX, r) | (r, u8::MAX) => r,
            (a, b) if rate_mbps(b) < rate_mbps(a) => b,
            (a, _) => a,
        };
        Least {
            mtu: self.mtu.min(o.mtu),
            rate,
        }
    }

    /// The final path of `links` links (fallbacks for what no image gave).
    pub fn path(self, links: u8) -> PathWalk {
        PathWalk {
            links,
            mtu: if self.mtu == u8::MAX { FALLBACK_MTU } else { self.mtu },
            rate: if self.rate == u8::MAX { FALLBACK_RATE } else { self.rate },
        }
    }
}

/// Port `port_num` of a node, by index into [`Subnet::ports`] (switch ports are stored in port
/// order; anything else is searched).
pub(crate) fn node_port_index(subnet: &Subnet, node: &Node, port_num: u8) -> Option<u32> {
    if let Some(&i) = node.ports.get(usize::from(port_num)) {
        if subnet.ports.get(i as usize).is_some_and(|p| p.port_num == port_num) {
            return Some(i);
        }
    }
    node.ports
        .iter()
        .copied()
        .find(|&i| subnet.ports.get(i as usize).is_some_and(|p| p.port_num == port_num))
}

/// A port's end of a live link: the peer port's index (`None`: no link, or either end Down).
pub(crate) fn live_peer(subnet: &Subnet, p: &Port) -> Option<u32> {
    let (n, pn) = p.peer?;
    let node = subnet.nodes.get(n as usize)?;
    let q = node_port_index(subnet, node, pn)?;
    let qp = &subnet.ports[q as usize];
    (port_state(&p.port_info) != 1 && port_state(&qp.port_info) != 1).then_some(q)
}

/// Whether an end port can send or receive at all: a switch's port 0, or a CA port with a
/// live link.
pub(crate) fn end_port_live(subnet: &Subnet, port: u32) -> bool {
    let Some(p) = subnet.ports.get(port as usize) else {
        return false;
    };
    match subnet.nodes.get(p.node as usize) {
        Some(n) if n.is_switch() => p.port_num == 0,
        Some(_) => live_peer(subnet, p).is_some(),
        None => false,
    }
}

/// The LFT entry of switch `sw` (node index) for `lid` (0xff past the table's end).
fn lft_entry(subnet: &Subnet, sw: u32, lid: u16) -> u8 {
    subnet.lft(sw).and_then(|t| t.get(usize::from(lid))).unwrap_or(0xff)
}

/// The end port owning `lid` (index into [`Subnet::ports`]).
pub(crate) fn lid_owner(subnet: &Subnet, lid: u16) -> Option<u32> {
    subnet.lid_port.get(usize::from(lid)).copied().filter(|&i| i != NO_PORT)
}

/// The end of a walk that reached CA port `q` (`qp`): `path` when it is the destination
/// port `dest` (the owner of `dlid`), else the walk ended on the wrong port.
fn end_node(q: u32, qp: &Port, dest: u32, dlid: u16, path: PathWalk) -> Result<PathWalk, WalkError> {
    if q == dest {
        Ok(path)
    } else {
        Err(WalkError::WrongPort {
            guid: qp.guid,
            port: qp.port_num,
            lid: dlid,
        })
    }
}

/// Walks the installed tables from end port `src` (index into [`Subnet::ports`]: a CA port or
/// a switch's port 0) to `dlid`.
pub fn walk(subnet: &Subnet, src: u32, dlid: u16) -> Result<PathWalk, WalkError> {
    let dest = lid_owner(subnet, dlid).ok_or(WalkError::UnknownLid { lid: dlid })?;
    let sp = &subnet.ports[src as usize];
    let not_live = || WalkError::SourceNotLive {
        guid: sp.guid,
        port: sp.port_num,
    };
    if !end_port_live(subnet, src) {
        return Err(not_live());
    }
    if dest == src {
        let least = if subnet.nodes[sp.node as usize].is_switch() {
            Least::NONE.port_zero(sp)
        } else {
            Least::NONE.port(sp)
        };
        return Ok(least.path(0));
    }
    let mut least = Least::NONE;
    let mut links = 0u8;
    let mut sw = sp.node;
    if subnet.nodes[sw as usize].is_switch() {
        least = least.port_zero(sp);
    } else {
        let q = live_peer(subnet, sp).ok_or_else(not_live)?;
        let qp = &subnet.ports[q as usize];
        least = least.link(sp, qp);
        links = 1;
        if !subnet.nodes[qp.node as usize].is_switch() {
            // Two CAs cabled back to back.
            return end_node(q, qp, dest, dlid, least.path(links));
        }
        sw = qp.node;
    }
    loop {
        let node = &subnet.nodes[sw as usize];
        let guid = node.guid();
        let out = lft_entry(subnet, sw, dlid);
        if out == 0 {
            return match node_port_index(subnet, node, 0) {
                Some(p0) if p0 == dest => Ok(least.port_zero(&subnet.ports[p0 as usize]).path(links)),
                _ => Err(WalkError::WrongPort {
                    guid,
                    port: 0,
                    lid: dlid,
                }),
            };
        }
        if out == 0xff {
            return Err(WalkError::NoRoute { guid, lid: dlid });
        }
        let dead = WalkError::DeadPort {
            guid,
            port: out,
            lid: dlid,
        };
        let e = node_port_index(subnet, node, out).ok_or_else(|| dead.clone())?;
        let ep = &subnet.ports[e as usize];
        let q = live_peer(subnet, ep).ok_or(dead)?;
        let qp = &subnet.ports[q as usize];
        if links >= MAX_LINKS {
            return Err(WalkError::TooLong { lid: dlid });
        }
        least = least.link(ep, qp);
        links += 1;
        if !subnet.nodes[qp.node as usize].is_switch() {
            return end_node(q, qp, dest, dlid, least.path(links));
        }
        sw = qp.node;
    }
}

/// One (switch, LID) entry of [`Columns`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Links from the switch to the destination; or one of the markers below.
    links: u8,
    least: Least,
}

const UNKNOWN: u8 = 0xfd;
const PENDING: u8 = 0xfe;
const UNREACHABLE: u8 = 0xff;

impl Entry {
    const UNKNOWN: Entry = Entry {
        links: UNKNOWN,
        least: Least::NONE,
    };
    const UNREACHABLE: Entry = Entry {
        links: UNREACHABLE,
        least: Least::NONE,
    };
}

/// What one switch does with a LID.
enum Step {
    Done(Entry),
    Next { next: u32, least: Least },
}

/// Where the walk from an end port enters the switches.
#[derive(Clone, Copy, Debug)]
enum First {
    /// Not a live end port.
    Dead,
    /// At switch `sw` (node index) after `links` links (0 from a switch's port 0) limited by
    /// `least`.
    Switch { sw: u32, links: u8, least: Least },
    /// A CA cabled back to back to the CA port `peer`.
    Peer { peer: u32, least: Least },
}

/// Walk results of every switch towards every LID, computed a LID at a time on first use.
pub(crate) struct Columns {
    /// Switch node index → dense switch number (`u32::MAX` for CAs).
    dense: Vec<u32>,
    /// Dense switch number → node index.
    switches: Vec<u32>,
    /// Per LID, once computed: one entry per switch (dense number).
    cols: Vec<Option<Box<[Entry]>>>,
    stack: Vec<(u32, Least)>,
    /// Per port: its own limits ([`Least::port`]).
    port_least: Vec<Least>,
    /// Per port: where a walk from it enters the switches (end ports only).
    first: Vec<First>,
    /// Switch-major copy of the links of every entry (`reach[s * lids + lid]`), once every
    /// column is filled ([`Columns::fill_all`]): the reverse walks of a whole table read it in
    /// LID order instead of one column each.
    reach: Vec<u8>,
}

impl Columns {
    pub fn new(subnet: &Subnet) -> Columns {
        let mut dense = vec![u32::MAX; subnet.nodes.len()];
        let mut switches = Vec::new();
        for (i, n) in subnet.nodes.iter().enumerate() {
            if n.is_switch() {
                dense[i] = switches.len() as u32;
                switches.push(i as u32);
            }
        }
        let lids = subnet.lid_port.len();
        let port_least: Vec<Least> = subnet.ports.iter().map(|p| Least::NONE.port(p)).collect();
        let first = (0..subnet.ports.len() as u32)
            .map(|i| {
                let p = &subnet.ports[i as usize];
                if !end_port_live(subnet, i) {
                    return First::Dead;
                }
                if subnet.nodes[p.node as usize].is_switch() {
                    return First::Switch {
                        sw: p.node,
                        links: 0,
                        least: Least::NONE.port_zero(p),
                    };
                }
                match live_peer(subnet, p) {
                    None => First::Dead,
                    Some(q) => {
                        let qp = &subnet.ports[q as usize];
                        let least = port_least[i as usize].and(port_least[q as usize]);
                        if subnet.nodes[qp.node as usize].is_switch() {
                            First::Switch {
                                sw: qp.node,
                                links: 1,
                                least,
                            }
                        } else {
                            First::Peer { peer: q, least }
                        }
                    }
                }
            })
            .collect();
        Columns {
            dense,
            cols: vec![None; lids],
            switches,
            stack: Vec::new(),
            port_least,
            first,
            reach: Vec::new(),
        }
    }

    /// Whether end port `port` can send or receive at all ([`end_port_live`]).
    pub fn live(&self, port: u32) -> bool {
        !matches!(self.first[port as usize], First::Dead)
    }

    /// Fills the column of every LID an end port owns, and the switch-major reachability.
    pub fn fill_all(&mut self, subnet: &Subnet) {
        let lids = subnet.lid_port.len();
        for lid in 0..lids {
            if let Some(dest) = lid_owner(subnet, lid as u16) {
                self.fill(subnet, lid as u16, dest);
            }
        }
        let n = self.switches.len();
        self.reach = vec![UNREACHABLE; n * lids];
        for lid in 0..lids {
            let Some(col) = &self.cols[lid] else {
                continue;
            };
            for (s, e) in col.iter().enumerate() {
                self.reach[s * lids + lid] = e.links;
            }
        }
    }

    /// Whether the walk from end port `src` delivers `lid` (same answer as `walk(..).is_some()`;
    /// fast after [`Columns::fill_all`]).
    pub fn delivers(&mut self, subnet: &Subnet, src: u32, lid: u16) -> bool {
        if self.reach.is_empty() {
            return self.walk(subnet, src, lid).is_some();
        }
        let Some(dest) = lid_owner(subnet, lid) else {
            return false;
        };
        match self.first[src as usize] {
            First::Dead => false,
            _ if dest == src => true,
            First::Peer { peer, .. } => peer == dest,
            First::Switch { sw, links, .. } => {
                let lids = subnet.lid_port.len();
                let at = self.dense[sw as usize] as usize * lids + usize::from(lid);
                self.reach[at] <= MAX_LINKS - links
            }
        }
    }

    /// The walk from end port `src` to `dlid`, from the columns (same answers as [`walk`]).
    pub fn walk(&mut self, subnet: &Subnet, src: u32, dlid: u16) -> Option<PathWalk> {
        let dest = lid_owner(subnet, dlid)?;
        let (sw, links, least) = match self.first[src as usize] {
            First::Dead => return None,
            First::Switch { links: 0, least, .. } if dest == src => return Some(least.path(0)),
            _ if dest == src => return Some(self.port_least[src as usize].path(0)),
            First::Peer { peer, least } => return (peer == dest).then(|| least.path(1)),
            First::Switch { sw, links, least } => (sw, links, least),
        };
        self.fill(subnet, dlid, dest);
        let e = self.cols[usize::from(dlid)]
            .as_ref()
            .map_or(Entry::UNREACHABLE, |c| c[self.dense[sw as usize] as usize]);
        if e.links > MAX_LINKS - links {
            return None;
        }
        Some(least.and(e.least).path(links + e.links))
    }

    /// What switch `sw` (node index) does with `lid` bound for end port `dest`.
    fn step(&self, subnet: &Subnet, sw: u32, lid: u16, dest: u32) -> Step {
        let node = &subnet.nodes[sw as usize];
        let out = lft_entry(subnet, sw, lid);
        if out == 0 {
            return Step::Done(match node_port_index(subnet, node, 0) {
                Some(p0) if p0 == dest => Entry {
                    links: 0,
                    least: Least::NONE.port_zero(&subnet.ports[p0 as usize]),
                },
                _ => Entry::UNREACHABLE,
            });
        }
        if out == 0xff {
            return Step::Done(Entry::UNREACHABLE);
        }
        let Some(e) = node_port_index(subnet, node, out) else {
            return Step::Done(Entry::UNREACHABLE);
        };
        let ep = &subnet.ports[e as usize];
        let Some(q) = live_peer(subnet, ep) else {
            return Step::Done(Entry::UNREACHABLE);
        };
        let qp = &subnet.ports[q as usize];
        let least = self.port_least[e as usize].and(self.port_least[q as usize]);
        if subnet.nodes[qp.node as usize].is_switch() {
            Step::Next { next: qp.node, least }
        } else if q == dest {
            Step::Done(Entry { links: 1, least })
        } else {
            Step::Done(Entry::UNREACHABLE)
        }
    }

    /// Computes the column of `lid` (owned by end port `dest`) once.
    fn fill(&mut self, subnet: &Subnet, lid: u16, dest: u32) {
        let l = usize::from(lid);
        if self.cols[l].is_some() {
            return;
        }
        let n = self.switches.len();
        let mut col = vec![Entry::UNKNOWN; n].into_boxed_slice();
        let mut stack = std::mem::take(&mut self.stack);
        for s in 0..n {
            if col[s].links != UNKNOWN {
                continue;
            }
            stack.clear();
            let mut cur = s;
            let mut result;
            loop {
                col[cur].links = PENDING;
                match self.step(subnet, self.switches[cur], lid, dest) {
                    Step::Done(e) => {
                        result = e;
                        break;
                    }
                    Step::Next { next, least } => {
                        let nd = self.dense[next as usize] as usize;
                        let e = col[nd];
                        match e.links {
                            UNKNOWN => {
                                stack.push((cur as u32, least));
                                cur = nd;
                            }
                            PENDING => {
                                // A loop: nothing on it reaches the destination.
                                result = Entry::UNREACHABLE;
                                break;
                            }
                            _ => {
                                result = extend(e, least);
                                break;
                            }
                        }
                    }
                }
            }
            col[cur] = result;
            while let Some((prev, least)) = stack.pop() {
                result = extend(result, least);
                col[prev as usize] = result;
            }
        }
        self.stack = stack;
        self.cols[l] = Some(col);
    }
}

/// The entry one link before `e`.
fn extend(e: Entry, least: Least) -> Entry {
    if e.links >= MAX_LINKS {
        return Entry::UNREACHABLE;
    }
    Entry {
        links: e.links + 1,
        least: least.and(e.least),
    }
}
