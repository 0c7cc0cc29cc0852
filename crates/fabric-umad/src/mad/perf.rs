//! Performance Management (PerfMgt, management class 0x04) GMPs: the MAD image of a request
//! and its answer ([`PerfMad`]), ClassPortInfo's CapabilityMask, PortCounters (IBA vol. 1
//! 16.1.3.5) and PortCountersExtended (16.1.4.11).
//!
//! A PerfMgt MAD is a GSI MAD sent on QP1 (Q_Key 0x8001_0000) to the LID of the port whose
//! Performance Management Agent answers: a switch's LID (port 0) with `PortSelect` naming the
//! switch port, a CA port's own LID with `PortSelect` = that port. The common MAD header is an
//! SMP's (base version 1 @0, class @1, class version 1 @2, method @3, 16-bit status @4, TID @8,
//! attribute @16, modifier @20); the 40 bytes after it are reserved and the attribute data
//! starts at byte 64, as in an SMP. Offsets below are of that data, cross-checked against
//! rdma-core's libibmad fields (`IB_PC_*_F`, which `perfquery` prints) and against ibsim's
//! PMA under `perfquery` (the `ibsim_counters` tests of `fabric-umad-probe`).
//!
//! Every counter of PortCounters is narrow and saturates at its maximum; the data and packet
//! counters are 32 bits there and 64 bits in PortCountersExtended, read when the agent's
//! CapabilityMask has [`CAP_EXT_WIDTH`] or [`CAP_EXT_WIDTH_NOIETF`] (the latter guarantees
//! only those four 64-bit counters, all this driver reads from it). PortXmitWait is only
//! meaningful with [`CAP_XMIT_WAIT`] (`perfquery` zeroes it otherwise, and so does
//! [`port_counters`]).

use fabric_southbound::PortCounters;

use super::bytes::{be16, be32, be64, debug_fields, put16, put64};
use super::smp::{MadError, MAD_SIZE, METHOD_GET};

/// Management class: Performance Management.
pub const CLASS_PERF_MGT: u8 = 0x04;
/// PerfMgt class version.
pub const PERF_CLASS_VERSION: u8 = 1;
/// Method `GetResp` of a GMP.
pub const PERF_METHOD_GET_RESP: u8 = 0x81;
/// Attribute `ClassPortInfo` (every class has it; PerfMgt's CapabilityMask says what the
/// agent supports).
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
/// Attribute `PortCounters` (IBA 16.1.3.5).
pub const ATTR_PORT_COUNTERS: u16 = 0x0012;
/// Attribute `PortCountersExtended` (IBA 16.1.4.11).
pub const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;
/// Offset of the attribute data in a PerfMgt MAD.
pub const PERF_DATA_OFFSET: usize = 64;
/// Bytes of attribute data this codec reads and writes (the first 64 of the 192 a GMP has:
/// the simulator copies only those).
pub const PERF_DATA_SIZE: usize = 64;

/// ClassPortInfo CapabilityMask: AllPortSelect (PortSelect 0xFF sums every port).
pub const CAP_ALL_PORT_SELECT: u16 = 0x0100;
/// ClassPortInfo CapabilityMask: PortCountersExtended is supported (all its counters).
pub const CAP_EXT_WIDTH: u16 = 0x0200;
/// ClassPortInfo CapabilityMask: PortCountersExtended is supported, its four data and packet
/// counters only (IBA 1.2.1 errata, "NoIETF").
pub const CAP_EXT_WIDTH_NOIETF: u16 = 0x0400;
/// ClassPortInfo CapabilityMask: PortCounters' PortXmitWait is counted.
pub const CAP_XMIT_WAIT: u16 = 0x1000;

/// One PerfMgt MAD as a 256-byte image.
#[derive(Clone, PartialEq, Eq)]
pub struct PerfMad {
    /// The raw MAD.
    pub bytes: [u8; MAD_SIZE],
}

debug_fields!(PerfMad {
    method,
    status,
    attr = attr_id,
    port_select,
    tid
});

impl PerfMad {
    /// A Get of `attr` whose data carries `port_select` (PortSelect, data byte 1; ignored by
    /// ClassPortInfo) and CounterSelect 0.
    pub fn get(attr: u16, port_select: u8) -> PerfMad {
        let mut b = [0u8; MAD_SIZE];
        b[0] = 1;
        b[1] = CLASS_PERF_MGT;
        b[2] = PERF_CLASS_VERSION;
        b[3] = METHOD_GET;
        put16(&mut b, 16, attr);
        if attr != ATTR_CLASS_PORT_INFO {
            b[PERF_DATA_OFFSET + 1] = port_select;
        }
        PerfMad { bytes: b }
    }

    /// Parses a received MAD (only the first 232 bytes need be valid; the rest is zero-filled):
    /// base version 1, class PerfMgt, class version 1.
    pub fn parse(buf: &[u8]) -> Result<PerfMad, MadError> {
        let need = PERF_DATA_OFFSET + PERF_DATA_SIZE;
        if buf.len() < need {
            return Err(MadError::Short { len: buf.len(), need });
        }
        let mut b = [0u8; MAD_SIZE];
        let n = buf.len().min(MAD_SIZE);
        b[..n].copy_from_slice(&buf[..n]);
        if b[0] != 1 || b[1] != CLASS_PERF_MGT || b[2] != PERF_CLASS_VERSION {
            return Err(MadError::NotPerfMgt {
                base: b[0],
                class: b[1],
                version: b[2],
            });
        }
        Ok(PerfMad { bytes: b })
    }

    /// Method.
    pub fn method(&self) -> u8 {
        self.bytes[3]
    }
    /// MAD status (16 bits; 0 = success).
    pub fn status(&self) -> u16 {
        be16(&self.bytes, 4)
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
    /// PortSelect (data byte 1).
    pub fn port_select(&self) -> u8 {
        self.bytes[PERF_DATA_OFFSET + 1]
    }
    /// The first [`PERF_DATA_SIZE`] bytes of attribute data.
    pub fn data(&self) -> &[u8] {
        &self.bytes[PERF_DATA_OFFSET..PERF_DATA_OFFSET + PERF_DATA_SIZE]
    }
    /// The GetResp a Performance Management Agent sends for this request: header echoed
    /// (TID included), method GetResp, `status`, `data` as the attribute data (tests and fake
    /// agents).
    pub fn response(&self, status: u16, data: &[u8; PERF_DATA_SIZE]) -> PerfMad {
        let mut b = self.bytes;
        b[3] = PERF_METHOD_GET_RESP;
        put16(&mut b, 4, status);
        b[PERF_DATA_OFFSET..PERF_DATA_OFFSET + PERF_DATA_SIZE].copy_from_slice(data);
        PerfMad { bytes: b }
    }
}

/// ClassPortInfo's CapabilityMask (data bytes 2–3).
pub fn class_port_info_cap_mask(data: &[u8]) -> u16 {
    be16(data, 2)
}

/// Whether an agent with CapabilityMask `cap` answers PortCountersExtended.
pub fn has_extended_counters(cap: u16) -> bool {
    cap & (CAP_EXT_WIDTH | CAP_EXT_WIDTH_NOIETF) != 0
}

/// PortCounters data (IBA 16.1.3.5) as [`PortCounters`]: the error counters at their widths,
/// the 32-bit data and packet counters, PortXmitWait only when `cap` has [`CAP_XMIT_WAIT`]
/// (0 otherwise, as `perfquery` shows it).
pub fn port_counters(data: &[u8], cap: u16) -> PortCounters {
    PortCounters {
        symbol_errors: be16(data, 4).into(),
        link_error_recovery: data[6].into(),
        link_downed: data[7].into(),
        rcv_errors: be16(data, 8).into(),
        rcv_remote_physical_errors: be16(data, 10).into(),
        rcv_switch_relay_errors: be16(data, 12).into(),
        xmit_discards: be16(data, 14).into(),
        xmit_constraint_errors: data[16].into(),
        rcv_constraint_errors: data[17].into(),
        local_link_integrity_errors: (data[19] >> 4).into(),
        excessive_buffer_overrun_errors: (data[19] & 0x0f).into(),
        vl15_dropped: be16(data, 22).into(),
        xmit_wait: if cap & CAP_XMIT_WAIT != 0 {
            be32(data, 40).into()
        } else {
            0
        },
        xmit_data: be32(data, 24).into(),
        rcv_data: be32(data, 28).into(),
        xmit_packets: be32(data, 32).into(),
        rcv_packets: be32(data, 36).into(),
    }
}

/// Replaces the data and packet counters of `c` by the 64-bit ones of PortCountersExtended
/// data (IBA 16.1.4.11: PortXmitData @8, PortRcvData @16, PortXmitPkts @24, PortRcvPkts @32).
pub fn apply_extended(c: &mut PortCounters, data: &[u8]) {
    c.xmit_data = be64(data, 8);
    c.rcv_data = be64(data, 16);
    c.xmit_packets = be64(data, 24);
    c.rcv_packets = be64(data, 32);
}

/// PortCounters data for `c` on port `port_select`, each field saturated at its width (what an
/// agent answers; fake agents of the tests).
pub fn encode_port_counters(c: &PortCounters, port_select: u8) -> [u8; PERF_DATA_SIZE] {
    let sat8 = |v: u64| v.min(0xff) as u8;
    let sat16 = |v: u64| (v.min(0xffff) as u16).to_be_bytes();
    let sat32 = |v: u64| (v.min(0xffff_ffff) as u32).to_be_bytes();
    let mut d = [0u8; PERF_DATA_SIZE];
    d[1] = port_select;
    d[4..6].copy_from_slice(&sat16(c.symbol_errors));
    d[6] = sat8(c.link_error_recovery);
    d[7] = sat8(c.link_downed);
    d[8..10].copy_from_slice(&sat16(c.rcv_errors));
    d[10..12].copy_from_slice(&sat16(c.rcv_remote_physical_errors));
    d[12..14].copy_from_slice(&sat16(c.rcv_switch_relay_errors));
    d[14..16].copy_from_slice(&sat16(c.xmit_discards));
    d[16] = sat8(c.xmit_constraint_errors);
    d[17] = sat8(c.rcv_constraint_errors);
    d[19] = (c.local_link_integrity_errors.min(0xf) as u8) << 4 | c.excessive_buffer_overrun_errors.min(0xf) as u8;
    d[22..24].copy_from_slice(&sat16(c.vl15_dropped));
    d[24..28].copy_from_slice(&sat32(c.xmit_data));
    d[28..32].copy_from_slice(&sat32(c.rcv_data));
    d[32..36].copy_from_slice(&sat32(c.xmit_packets));
    d[36..40].copy_from_slice(&sat32(c.rcv_packets));
    d[40..44].copy_from_slice(&sat32(c.xmit_wait));
    d
}

/// PortCountersExtended data for `c` on port `port_select` (its four 64-bit data and packet
/// counters).
pub fn encode_port_counters_ext(c: &PortCounters, port_select: u8) -> [u8; PERF_DATA_SIZE] {
    let mut d = [0u8; PERF_DATA_SIZE];
    d[1] = port_select;
    put64(&mut d, 8, c.xmit_data);
    put64(&mut d, 16, c.rcv_data);
    put64(&mut d, 24, c.xmit_packets);
    put64(&mut d, 32, c.rcv_packets);
    d
}

/// ClassPortInfo data with CapabilityMask `cap` (base version 1, class version 1).
pub fn encode_class_port_info(cap: u16) -> [u8; PERF_DATA_SIZE] {
    let mut d = [0u8; PERF_DATA_SIZE];
    d[0] = 1;
    d[1] = PERF_CLASS_VERSION;
    put16(&mut d, 2, cap);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_southbound::Counter;

    #[test]
    fn get_request_layout() {
        let m = PerfMad::get(ATTR_PORT_COUNTERS, 7);
        // Base version 1, class 0x04, class version 1, Get; attribute 0x0012; PortSelect in
        // data byte 1 (MAD byte 65); no modifier.
        assert_eq!(&m.bytes[..4], &[1, 0x04, 1, 1]);
        assert_eq!(&m.bytes[16..18], &[0x00, 0x12]);
        assert_eq!(&m.bytes[20..24], &[0, 0, 0, 0]);
        assert_eq!(m.bytes[65], 7);
        assert_eq!(m.port_select(), 7);
        assert!(m.bytes[66..].iter().all(|&b| b == 0), "CounterSelect 0, no data");
        let e = PerfMad::get(ATTR_PORT_COUNTERS_EXT, 3);
        assert_eq!((&e.bytes[16..18], e.bytes[65]), (&[0x00, 0x1d][..], 3));
        let c = PerfMad::get(ATTR_CLASS_PORT_INFO, 9);
        assert_eq!(c.bytes[65], 0, "ClassPortInfo data is the answer's, not a PortSelect");
    }

    #[test]
    fn response_echoes_the_request_and_parses() {
        let mut m = PerfMad::get(ATTR_PORT_COUNTERS, 2);
        m.set_tid(0x00fa_b01c_0000_0042);
        let r = m.response(0, &encode_port_counters(&PortCounters::default(), 2));
        let p = PerfMad::parse(&r.bytes[..232]).unwrap();
        assert_eq!((p.method(), p.status(), p.tid()), (0x81, 0, 0x00fa_b01c_0000_0042));
        assert_eq!((p.attr_id(), p.port_select()), (ATTR_PORT_COUNTERS, 2));
        assert!(matches!(PerfMad::parse(&r.bytes[..100]), Err(MadError::Short { .. })));
        let mut smp = r.bytes;
        smp[1] = 0x81;
        assert!(matches!(
            PerfMad::parse(&smp),
            Err(MadError::NotPerfMgt { class: 0x81, .. })
        ));
        assert_eq!(
            format!("{p:?}"),
            "PerfMad { method: 129, status: 0, attr: 18, port_select: 2, tid: 70562378483236930 }"
        );
    }

    /// PortCounters data with every field a distinct value, at the offsets of IBA 16.1.3.5
    /// (libibmad's `IB_PC_*_F`), written out by hand.
    fn hand_image() -> [u8; PERF_DATA_SIZE] {
        let mut d = [0u8; PERF_DATA_SIZE];
        d[1] = 5; // PortSelect
        d[4..6].copy_from_slice(&[0x01, 0x02]); // SymbolErrorCounter
        d[6] = 0x03; // LinkErrorRecoveryCounter
        d[7] = 0x04; // LinkDownedCounter
        d[8..10].copy_from_slice(&[0x05, 0x06]); // PortRcvErrors
        d[10..12].copy_from_slice(&[0x07, 0x08]); // PortRcvRemotePhysicalErrors
        d[12..14].copy_from_slice(&[0x09, 0x0a]); // PortRcvSwitchRelayErrors
        d[14..16].copy_from_slice(&[0x0b, 0x0c]); // PortXmitDiscards
        d[16] = 0x0d; // PortXmitConstraintErrors
        d[17] = 0x0e; // PortRcvConstraintErrors
        d[19] = 0xa7; // LocalLinkIntegrityErrors (high nibble), ExcessiveBufferOverrunErrors
        d[20..22].copy_from_slice(&[0xee, 0xee]); // QP1Dropped (not read)
        d[22..24].copy_from_slice(&[0x0f, 0x10]); // VL15Dropped
        d[24..28].copy_from_slice(&[0x11, 0x12, 0x13, 0x14]); // PortXmitData
        d[28..32].copy_from_slice(&[0x21, 0x22, 0x23, 0x24]); // PortRcvData
        d[32..36].copy_from_slice(&[0x31, 0x32, 0x33, 0x34]); // PortXmitPkts
        d[36..40].copy_from_slice(&[0x41, 0x42, 0x43, 0x44]); // PortRcvPkts
        d[40..44].copy_from_slice(&[0x51, 0x52, 0x53, 0x54]); // PortXmitWait
        d
    }

    #[test]
    fn port_counters_fields_at_their_offsets() {
        let c = port_counters(&hand_image(), CAP_XMIT_WAIT);
        let want = PortCounters {
            symbol_errors: 0x0102,
            link_error_recovery: 0x03,
            link_downed: 0x04,
            rcv_errors: 0x0506,
            rcv_remote_physical_errors: 0x0708,
            rcv_switch_relay_errors: 0x090a,
            xmit_discards: 0x0b0c,
            xmit_constraint_errors: 0x0d,
            rcv_constraint_errors: 0x0e,
            local_link_integrity_errors: 0xa,
            excessive_buffer_overrun_errors: 0x7,
            vl15_dropped: 0x0f10,
            xmit_wait: 0x5152_5354,
            xmit_data: 0x1112_1314,
            rcv_data: 0x2122_2324,
            xmit_packets: 0x3132_3334,
            rcv_packets: 0x4142_4344,
        };
        assert_eq!(c, want);
        // Encoding writes the same image (QP1Dropped aside, which is not read).
        let mut img = hand_image();
        img[20..22].copy_from_slice(&[0, 0]);
        assert_eq!(encode_port_counters(&want, 5), img);
        // Without IsPortXmitWaitSupported the field is not a counter.
        assert_eq!(port_counters(&hand_image(), CAP_EXT_WIDTH).xmit_wait, 0);
    }

    #[test]
    fn saturated_fields_read_as_their_maximum() {
        // Every field at its saturation value: all ones.
        let c = port_counters(&[0xff; PERF_DATA_SIZE], CAP_XMIT_WAIT);
        let want = PortCounters {
            symbol_errors: 0xffff,
            link_error_recovery: 0xff,
            link_downed: 0xff,
            rcv_errors: 0xffff,
            rcv_remote_physical_errors: 0xffff,
            rcv_switch_relay_errors: 0xffff,
            xmit_discards: 0xffff,
            xmit_constraint_errors: 0xff,
            rcv_constraint_errors: 0xff,
            local_link_integrity_errors: 0xf,
            excessive_buffer_overrun_errors: 0xf,
            vl15_dropped: 0xffff,
            xmit_wait: 0xffff_ffff,
            xmit_data: 0xffff_ffff,
            rcv_data: 0xffff_ffff,
            xmit_packets: 0xffff_ffff,
            rcv_packets: 0xffff_ffff,
        };
        assert_eq!(c, want);
        // The error counters saturate where the shared contract says they do.
        for k in Counter::ERRORS.into_iter().chain([Counter::XmitWait]) {
            assert_eq!(c.get(k), k.max(), "{k:?}");
        }
        // Values above a field's width are written saturated, as an agent holds them.
        let big = PortCounters {
            symbol_errors: 70_000,
            link_downed: 300,
            local_link_integrity_errors: 99,
            xmit_data: 1 << 40,
            ..PortCounters::default()
        };
        let back = port_counters(&encode_port_counters(&big, 1), 0);
        assert_eq!(
            (
                back.symbol_errors,
                back.link_downed,
                back.local_link_integrity_errors,
                back.xmit_data
            ),
            (0xffff, 0xff, 0xf, 0xffff_ffff)
        );
    }

    #[test]
    fn extended_counters_replace_the_32_bit_ones() {
        // IBA 16.1.4.11 offsets, by hand: PortXmitData @8, PortRcvData @16, PortXmitPkts @24,
        // PortRcvPkts @32, 64 bits each.
        let mut d = [0u8; PERF_DATA_SIZE];
        d[1] = 4;
        d[8..16].copy_from_slice(&[0x01, 0, 0, 0, 0, 0, 0, 0x02]);
        d[16..24].fill(0xff);
        d[24..32].copy_from_slice(&[0, 0, 0, 0x01, 0, 0, 0, 0]);
        d[32..40].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0x12, 0x34]);
        let mut c = port_counters(&hand_image(), 0);
        apply_extended(&mut c, &d);
        assert_eq!(
            (c.xmit_data, c.rcv_data, c.xmit_packets, c.rcv_packets),
            (0x0100_0000_0000_0002, u64::MAX, 0x0000_0001_0000_0000, 0x1234)
        );
        assert_eq!(c.symbol_errors, 0x0102, "error counters stay PortCounters'");
        assert_eq!(encode_port_counters_ext(&c, 4), d);
    }

    #[test]
    fn class_port_info_capabilities() {
        // ibsim 0.10's switch PMA: AllPortSelect, extended width, XmitWait.
        let d = encode_class_port_info(0x1300);
        assert_eq!(&d[..4], &[1, 1, 0x13, 0x00]);
        assert_eq!(class_port_info_cap_mask(&d), 0x1300);
        assert!(has_extended_counters(0x1300));
        assert!(has_extended_counters(CAP_EXT_WIDTH_NOIETF));
        assert!(!has_extended_counters(CAP_ALL_PORT_SELECT | CAP_XMIT_WAIT));
    }
}
