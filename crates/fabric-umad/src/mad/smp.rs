//! The SMP itself: constants of the MAD header, addressing ([`Route`]: directed route or LID
//! routed), the 256-byte image ([`Smp`]: requests, parsing, header fields, the responses the
//! manager sends), and hex byte images.

use super::bytes::{be16, be32, be64, debug_fields, put16, put32, put64};

/// Size of a MAD.
pub const MAD_SIZE: usize = 256;
/// Size of the SMP attribute data.
pub const SMP_DATA_SIZE: usize = 64;
/// Offset of the attribute data inside an SMP.
pub const SMP_DATA_OFFSET: usize = 64;
/// Longest directed route (the InitialPath array has 64 bytes, entry 0 unused).
pub const MAX_HOPS: usize = 63;
/// Offset of the directed-route InitialPath (64 bytes, entry 0 unused).
pub const DR_INITIAL_PATH_OFFSET: usize = 128;
/// Offset of the directed-route ReturnPath (64 bytes, entry 0 unused).
pub const DR_RETURN_PATH_OFFSET: usize = 192;
/// The permissive LID (0xffff): DrSLID/DrDLID of an SMP directed end to end, and the umad
/// address of a directed-route SMP.
pub const PERMISSIVE_LID: u16 = 0xffff;

/// Management class: LID-routed subnet management.
pub const CLASS_SMP_LID: u8 = 0x01;
/// Management class: directed-route subnet management.
pub const CLASS_SMP_DR: u8 = 0x81;

/// SMP method `Get`.
pub const METHOD_GET: u8 = 0x01;
/// SMP method `Set`.
pub const METHOD_SET: u8 = 0x02;
/// SMP method `GetResp`.
pub const METHOD_GET_RESP: u8 = 0x81;
/// SMP method `Trap`.
pub const METHOD_TRAP: u8 = 0x05;
/// SMP method `TrapRepress`.
pub const METHOD_TRAP_REPRESS: u8 = 0x07;

/// Attribute `Notice` (traps).
pub const ATTR_NOTICE: u16 = 0x0002;
/// Attribute `NodeDescription`.
pub const ATTR_NODE_DESC: u16 = 0x0010;
/// Attribute `NodeInfo`.
pub const ATTR_NODE_INFO: u16 = 0x0011;
/// Attribute `SwitchInfo`.
pub const ATTR_SWITCH_INFO: u16 = 0x0012;
/// Attribute `PortInfo` (modifier = port number).
pub const ATTR_PORT_INFO: u16 = 0x0015;
/// Attribute `SLtoVLMappingTable`.
pub const ATTR_SL2VL: u16 = 0x0017;
/// Attribute `SMInfo` (answered by the manager itself: the simulator and the HCA forward it).
pub const ATTR_SM_INFO: u16 = 0x0020;
/// Attribute `LinearForwardingTable` (modifier = LFT block number).
pub const ATTR_LFT: u16 = 0x0019;
/// MAD status "unsupported method/attribute combination" (IBA 13.4.7).
pub const STATUS_UNSUPPORTED_ATTR: u16 = 0x000c;

/// NodeInfo node type: channel adapter.
pub const NODE_TYPE_CA: u8 = 1;
/// NodeInfo node type: switch.
pub const NODE_TYPE_SWITCH: u8 = 2;
/// NodeInfo node type: router.
pub const NODE_TYPE_ROUTER: u8 = 3;

/// Errors of the SMP codec.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MadError {
    /// A received MAD is shorter than the fixed SMP header.
    #[error("MAD of {len} bytes is too short (need {need})")]
    Short { len: usize, need: usize },
    /// A directed route longer than the 63 hops an SMP can carry.
    #[error("directed route of {0} hops is longer than {MAX_HOPS}")]
    RouteTooLong(usize),
    /// The MAD is not an SMP of a version this driver speaks.
    #[error("not an SMP: base version {base}, class {class:#04x}, class version {version}")]
    NotSmp { base: u8, class: u8, version: u8 },
    /// The MAD is not a Performance Management MAD of a version this driver speaks.
    #[error("not a PerfMgt MAD: base version {base}, class {class:#04x}, class version {version}")]
    NotPerfMgt { base: u8, class: u8, version: u8 },
}

/// How an SMP is addressed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// Directed route: output port at each hop (`path[0]` is the port of the first hop out of
    /// the manager's node; an empty path addresses the manager's own node).
    Directed(Vec<u8>),
    /// LID routed to this destination LID (needs ACTIVE links and LFT entries on the way).
    Lid(u16),
}

impl Route {
    /// Number of hops of a directed route (0 for LID routes).
    pub fn hops(&self) -> usize {
        match self {
            Route::Directed(p) => p.len(),
            Route::Lid(_) => 0,
        }
    }
}

/// One SMP as a 256-byte image.
#[derive(Clone, PartialEq, Eq)]
pub struct Smp {
    /// The raw MAD.
    pub bytes: [u8; MAD_SIZE],
}

debug_fields!(Smp {
    class,
    method,
    status,
    attr = attr_id,
    modifier = attr_mod,
    tid
});

impl Smp {
    /// A request (Get or Set) of `attr`/`modifier` along `route` with `data` as attribute data.
    pub fn request(
        route: &Route,
        method: u8,
        attr: u16,
        modifier: u32,
        data: &[u8; SMP_DATA_SIZE],
    ) -> Result<Smp, MadError> {
        let mut b = [0u8; MAD_SIZE];
        b[0] = 1;
        b[2] = 1;
        b[3] = method;
        put16(&mut b, 16, attr);
        put32(&mut b, 20, modifier);
        match route {
            Route::Directed(path) => {
                if path.len() > MAX_HOPS {
                    return Err(MadError::RouteTooLong(path.len()));
                }
                b[1] = CLASS_SMP_DR;
                b[6] = 0;
                b[7] = path.len() as u8;
                put16(&mut b, 32, 0xffff);
                put16(&mut b, 34, 0xffff);
                b[129..129 + path.len()].copy_from_slice(path);
            }
            Route::Lid(_) => b[1] = CLASS_SMP_LID,
        }
        b[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(data);
        Ok(Smp { bytes: b })
    }

    /// Parses a received MAD (only the first 232 bytes need be valid; the rest is zero-filled).
    pub fn parse(buf: &[u8]) -> Result<Smp, MadError> {
        let need = SMP_DATA_OFFSET + SMP_DATA_SIZE;
        if buf.len() < need {
            return Err(MadError::Short { len: buf.len(), need });
        }
        let mut b = [0u8; MAD_SIZE];
        let n = buf.len().min(MAD_SIZE);
        b[..n].copy_from_slice(&buf[..n]);
        if b[0] != 1 || (b[1] != CLASS_SMP_DR && b[1] != CLASS_SMP_LID) || b[2] != 1 {
            return Err(MadError::NotSmp {
                base: b[0],
                class: b[1],
                version: b[2],
            });
        }
        Ok(Smp { bytes: b })
    }

    /// Management class (0x81 directed route, 0x01 LID routed).
    pub fn class(&self) -> u8 {
        self.bytes[1]
    }
    /// Method.
    pub fn method(&self) -> u8 {
        self.bytes[3]
    }
    /// MAD status without the directed-route D bit.
    pub fn status(&self) -> u16 {
        let s = be16(&self.bytes, 4);
        if self.class() == CLASS_SMP_DR {
            s & 0x7fff
        } else {
            s
        }
    }
    /// Transaction id.
    pub fn tid(&self) -> u64 {
        be64(&self.bytes, 8)
    }
    /// Sets the transaction id.
    pub fn set_tid(&mut self, tid: u64) {
        put64(&mut self.bytes, 8, tid);
    }
    /// Attribute id.
    pub fn attr_id(&self) -> u16 {
        be16(&self.bytes, 16)
    }
    /// Attribute modifier.
    pub fn attr_mod(&self) -> u32 {
        be32(&self.bytes, 20)
    }
    /// M_Key (the requester's proof for ports protected by an M_Key).
    pub fn m_key(&self) -> u64 {
        be64(&self.bytes, 24)
    }
    /// Directed-route hop count.
    pub fn hop_count(&self) -> u8 {
        self.bytes[7]
    }
    /// The 64 attribute-data bytes.
    pub fn data(&self) -> &[u8; SMP_DATA_SIZE] {
        let s = &self.bytes[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE];
        // The slice has exactly SMP_DATA_SIZE bytes.
        s.try_into().unwrap_or(&[0u8; SMP_DATA_SIZE])
    }
    /// True for a request (Get, Set) sent to this port, as opposed to a response or a trap.
    pub fn is_request(&self) -> bool {
        matches!(self.method(), METHOD_GET | METHOD_SET)
    }
    /// Directed-route HopPointer.
    pub fn hop_pointer(&self) -> u8 {
        self.bytes[6]
    }
    /// Directed-route D bit (direction): false on the way out (request), true on the way back
    /// (response).
    pub fn direction(&self) -> bool {
        self.class() == CLASS_SMP_DR && self.bytes[4] & 0x80 != 0
    }
    /// Directed-route DrSLID: the LID-routed segment before the directed one starts there
    /// ([`PERMISSIVE_LID`] when the SMP is directed from its source).
    pub fn dr_slid(&self) -> u16 {
        be16(&self.bytes, 32)
    }
    /// Directed-route DrDLID: the LID-routed segment after the directed one ends there
    /// ([`PERMISSIVE_LID`] when the SMP is directed up to its destination).
    pub fn dr_dlid(&self) -> u16 {
        be16(&self.bytes, 34)
    }
    /// Directed-route InitialPath entries 1..=HopCount: the output port at each hop (entry 0
    /// is unused).
    pub fn initial_path(&self) -> &[u8] {
        let n = usize::from(self.hop_count()).min(MAX_HOPS);
        &self.bytes[DR_INITIAL_PATH_OFFSET + 1..DR_INITIAL_PATH_OFFSET + 1 + n]
    }
    /// Directed-route ReturnPath entries 1..=HopCount: the input port at each hop, written by
    /// the nodes a request crossed (entry 0 unused).
    pub fn return_path(&self) -> &[u8] {
        let n = usize::from(self.hop_count()).min(MAX_HOPS);
        &self.bytes[DR_RETURN_PATH_OFFSET + 1..DR_RETURN_PATH_OFFSET + 1 + n]
    }
    /// The GetResp answering this request (Get or Set) addressed to the manager's port,
    /// whatever its class: [`Smp::lid_response`] for a LID-routed one,
    /// [`Smp::dr_response`] for a directed-route one.
    pub fn response(&self, status: u16, data: &[u8; SMP_DATA_SIZE]) -> Smp {
        if self.class() == CLASS_SMP_DR {
            self.dr_response(status, data)
        } else {
            self.lid_response(status, data)
        }
    }
    /// The GetResp answering this directed-route request (IBA 14.2.2): the request's header
    /// and path fields with method GetResp, the D bit set (the SMP now travels the return
    /// path), the 15-bit `status`, and `data` as attribute data.
    ///
    /// Everything that steers the way back is kept as received: HopCount, InitialPath, the
    /// ReturnPath the crossed nodes filled in, DrSLID (where a LID-routed tail of the way back
    /// goes) and DrDLID. The HopPointer is left as it arrived too: on a real port the kernel's
    /// SMI has set it to HopCount + 1 on receipt (C14-9) and steps it down as the response
    /// leaves (C14-13); ibsim never moves it (a request reaches the manager with 0 and the
    /// simulator only accepts a response that still has 0, then routes it back along the
    /// ReturnPath). The TID is echoed whole.
    pub fn dr_response(&self, status: u16, data: &[u8; SMP_DATA_SIZE]) -> Smp {
        let mut b = self.bytes;
        b[3] = METHOD_GET_RESP;
        put16(&mut b, 4, 0x8000 | (status & 0x7fff));
        b[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(data);
        Smp { bytes: b }
    }
    /// The TrapRepress acknowledging this Trap (IBA vol. 1 ch. 13: a trap is repeated until the
    /// manager represses it): the trap's header with method
    /// TrapRepress (0x07) and status 0, its TID, attribute (Notice), modifier and notice data
    /// unchanged.
    pub fn trap_repress(&self) -> Smp {
        let mut b = self.bytes;
        b[3] = METHOD_TRAP_REPRESS;
        put16(&mut b, 4, 0);
        Smp { bytes: b }
    }
    /// The GetResp answering this LID-routed request: same class, TID, attribute and modifier,
    /// `status`, and `data` as attribute data.
    pub fn lid_response(&self, status: u16, data: &[u8; SMP_DATA_SIZE]) -> Smp {
        let mut b = [0u8; MAD_SIZE];
        b[..SMP_DATA_OFFSET].copy_from_slice(&self.bytes[..SMP_DATA_OFFSET]);
        b[3] = METHOD_GET_RESP;
        put16(&mut b, 4, status);
        b[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(data);
        Smp { bytes: b }
    }
}

/// Parses hex text (whitespace ignored) into bytes; used for stored byte images.
pub fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| std::str::from_utf8(p).ok().and_then(|s| u8::from_str_radix(s, 16).ok()))
        .collect()
}

/// Formats bytes as hex, 32 bytes per line.
pub fn to_hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2 + b.len() / 32);
    for (i, x) in b.iter().enumerate() {
        if i > 0 && i % 32 == 0 {
            s.push('\n');
        }
        s.push_str(&format!("{x:02x}"));
    }
    s
}
