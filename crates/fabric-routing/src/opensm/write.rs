//! The writer of `opensm-lfts.dump`: streams into any [`std::io::Write`] in bounded memory.
//!
//! A dump has one line per (switch, routed LID): 238 million lines, ~18 GB, for a 34 992-node
//! fabric. Every line of a LID is the same but for its port, so the lines are rendered once per
//! LID (a template whose three port digits are patched per switch) and each switch's section is
//! copied from them into a small buffer that goes to the writer whenever it holds
//! [`FLUSH_BYTES`]. Memory beyond the tables: the templates (one line per assigned LID), the
//! LID owner table, and the buffer.

use std::io::{self, Write};

use fabric_topology::{Fabric, Lid, SwitchId};

use crate::lft::{Lfts, NO_ROUTE};
use crate::lid::{LidOwner, LidOwners, LidPlan};

/// Bytes gathered before one `write_all` to the output; every such write holds whole lines.
pub const FLUSH_BYTES: usize = 256 * 1024;

/// Text of a LID that no end port or switch owns.
const UNKNOWN: &[u8] = b"unknown node and type";

/// Writes OpenSM's `opensm-lfts.dump` of a routed fabric, switch by switch (see the module).
pub struct OpensmLftWriter<'a> {
    fabric: &'a Fabric,
    lids: &'a LidPlan,
    lfts: &'a Lfts,
    top: Lid,
    order: Vec<SwitchId>,
    owners: LidOwners,
    /// Lines of the owned LIDs, port digits `000`; LID `l`'s is `text[start[l]..start[l + 1]]`,
    /// empty for an unowned LID (rendered on the fly).
    text: Vec<u8>,
    start: Vec<u32>,
}

impl<'a> OpensmLftWriter<'a> {
    /// Prepares the dump of every live switch that has a LID (ascending GUID, as OpenSM's switch
    /// table), covering LIDs `0..=top` of the plan.
    pub fn new(fabric: &'a Fabric, lids: &'a LidPlan, lfts: &'a Lfts) -> Self {
        let top = lids.top().min(lfts.row_len().saturating_sub(1) as Lid);
        let mut order: Vec<SwitchId> = fabric
            .switch_ids()
            .filter(|&s| {
                fabric.switch(s).up
                    && s.idx() < lfts.num_switches()
                    && lfts.row_len() > 0
                    && lids.switch_lid.get(s.idx()).is_some_and(|&l| l != 0)
            })
            .collect();
        order.sort_by_key(|&s| fabric.switch(s).guid);
        let owners = LidOwners::new(lids);
        let mut w = OpensmLftWriter {
            fabric,
            lids,
            lfts,
            top,
            order,
            owners,
            text: Vec::new(),
            start: Vec::new(),
        };
        if !w.order.is_empty() {
            w.render_templates();
        }
        w
    }

    /// The switches of the dump, in dump order.
    pub fn switches(&self) -> &[SwitchId] {
        &self.order
    }

    /// The highest LID of every section (`Unicast lids [0-top]`).
    pub fn top(&self) -> Lid {
        self.top
    }

    fn render_templates(&mut self) {
        self.start.reserve_exact(self.top as usize + 2);
        self.start.push(0);
        let mut comment = Vec::new();
        for lid in 0..=self.top {
            if let Some(owner) = self.owners.get(lid) {
                comment.clear();
                self.write_comment(owner, &mut comment);
                let before = self.text.len();
                push_line(&mut self.text, lid, 0, &comment);
                if u32::try_from(self.text.len()).is_err() {
                    // Past 4 GiB of text (never with real descriptions): the rest on the fly.
                    self.text.truncate(before);
                    self.start.resize(self.top as usize + 2, before as u32);
                    break;
                }
            }
            self.start.push(self.text.len() as u32);
        }
        self.text.shrink_to_fit();
    }

    /// `Channel Adapter portguid 0x..: 'desc'` or `Switch portguid 0x..: 'desc'`.
    fn write_comment(&self, owner: LidOwner, out: &mut Vec<u8>) {
        let (kind, guid, desc): (&[u8], _, &str) = match owner {
            LidOwner::EndPort { ep, .. } => {
                let e = self.fabric.end_port(ep);
                (b"Channel Adapter", e.port_guid, &e.desc)
            }
            LidOwner::Switch(s) => {
                let sw = self.fabric.switch(s);
                (b"Switch", sw.guid, &sw.desc)
            }
        };
        out.extend_from_slice(kind);
        out.extend_from_slice(b" portguid ");
        push_guid(out, guid);
        out.extend_from_slice(b": '");
        push_clean(out, desc);
        out.push(b'\'');
    }

    /// Writes the whole dump. Each `write_all` to `w` holds whole lines (about
    /// [`FLUSH_BYTES`]); `w` is not flushed.
    pub fn write_all<W: Write + ?Sized>(&self, w: &mut W) -> io::Result<()> {
        let mut buf = Vec::with_capacity(FLUSH_BYTES + 4096);
        for &s in &self.order {
            self.section(s, &mut buf, w)?;
        }
        if !buf.is_empty() {
            w.write_all(&buf)?;
        }
        Ok(())
    }

    /// Writes the section of one switch (nothing when the switch is not in the dump: down, or
    /// without a LID).
    pub fn write_switch<W: Write + ?Sized>(&self, s: SwitchId, w: &mut W) -> io::Result<()> {
        if !self.order.contains(&s) {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(FLUSH_BYTES + 4096);
        self.section(s, &mut buf, w)?;
        if !buf.is_empty() {
            w.write_all(&buf)?;
        }
        Ok(())
    }

    /// Appends the section of `s` to `buf`, passing `buf` to `w` whenever it is full.
    fn section<W: Write + ?Sized>(&self, s: SwitchId, buf: &mut Vec<u8>, w: &mut W) -> io::Result<()> {
        let sw = self.fabric.switch(s);
        let top = self.top;
        buf.extend_from_slice(b"Unicast lids [0-");
        push_dec(buf, u64::from(top));
        buf.extend_from_slice(b"] of switch Lid ");
        push_dec(buf, u64::from(self.lids.switch_lid(s)));
        buf.extend_from_slice(b" guid ");
        push_guid(buf, sw.guid);
        buf.extend_from_slice(b" ('");
        push_clean(buf, &sw.desc);
        buf.extend_from_slice(b"'):\n");
        let row = &self.lfts.row(s)[..=top as usize];
        let mut comment = Vec::new();
        for (lid, &port) in row.iter().enumerate() {
            if port == NO_ROUTE || port > sw.nports {
                continue;
            }
            let (a, b) = (self.start[lid] as usize, self.start[lid + 1] as usize);
            if a < b {
                let line = &self.text[a..b];
                let at = buf.len() + port_offset(lid as Lid);
                buf.extend_from_slice(line);
                buf[at..at + 3].copy_from_slice(&port_digits(port));
            } else {
                comment.clear();
                match self.owners.get(lid as Lid) {
                    Some(owner) => self.write_comment(owner, &mut comment),
                    None => comment.extend_from_slice(UNKNOWN),
                }
                push_line(buf, lid as Lid, port, &comment);
            }
            if buf.len() >= FLUSH_BYTES {
                w.write_all(buf)?;
                buf.clear();
            }
        }
        push_dec(buf, u64::from(top));
        buf.extend_from_slice(b" lids dumped\n");
        Ok(())
    }
}

/// Writes the LFTs of every live switch that has a LID, in OpenSM's dump format, into `w`
/// (streamed: see [`OpensmLftWriter`]; give it a file or a pipe, it buffers itself).
pub fn write_opensm_lfts_to<W: Write + ?Sized>(
    w: &mut W,
    fabric: &Fabric,
    lids: &LidPlan,
    lfts: &Lfts,
) -> io::Result<()> {
    OpensmLftWriter::new(fabric, lids, lfts).write_all(w)
}

/// Writes the LFTs of every live switch that has a LID, in OpenSM's dump format, as one string
/// (small fabrics and tests; big dumps go through [`write_opensm_lfts_to`]).
pub fn write_opensm_lfts(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> String {
    let mut out = Vec::new();
    write_opensm_lfts_to(&mut out, fabric, lids, lfts).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("the dump is UTF-8: descriptions are strings")
}

/// `0x<lid, at least 4 hex digits> <port, 3 digits> # <comment>\n`.
fn push_line(out: &mut Vec<u8>, lid: Lid, port: u8, comment: &[u8]) {
    out.extend_from_slice(b"0x");
    push_hex(out, u64::from(lid), 4);
    out.push(b' ');
    out.extend_from_slice(&port_digits(port));
    out.extend_from_slice(b" # ");
    out.extend_from_slice(comment);
    out.push(b'\n');
}

/// Offset of the port digits in a LID's line (`0x` + hex digits + space).
fn port_offset(lid: Lid) -> usize {
    2 + hex_width(u64::from(lid), 4) + 1
}

fn hex_width(v: u64, min: usize) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    bits.div_ceil(4).max(min)
}

fn push_hex(out: &mut Vec<u8>, v: u64, min: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = hex_width(v, min);
    for i in (0..n).rev() {
        out.push(HEX[((v >> (4 * i)) & 0xF) as usize]);
    }
}

fn push_guid(out: &mut Vec<u8>, g: u64) {
    out.extend_from_slice(b"0x");
    push_hex(out, g, 16);
}

fn push_dec(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// A port as three decimal digits (`007`).
fn port_digits(p: u8) -> [u8; 3] {
    [b'0' + p / 100, b'0' + p / 10 % 10, b'0' + p % 10]
}

/// A node description on one line (newlines become spaces).
fn push_clean(out: &mut Vec<u8>, s: &str) {
    out.extend(s.bytes().map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b }));
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
