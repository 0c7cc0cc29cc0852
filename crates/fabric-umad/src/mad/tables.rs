//! Multicast forwarding and partition tables, and the protection fields: the
//! MulticastForwardingTable (0x001B) and PartitionTable (0x0016) attributes (32 big-endian
//! 16-bit entries each), their attribute modifiers, the PortInfo M_Key / partition enforcement
//! fields, the SwitchInfo fields that bound the tables (MulticastFDBCap, MulticastFDBTop,
//! PartitionEnforcementCap), and [`stamp_m_key`], which puts a manager's M_Key into an outgoing
//! SMP.
//!
//! Offsets follow IBA vol. 1 ch. 14 (14.2.5.6 PortInfo, 14.2.5.4 SwitchInfo, 14.2.5.7
//! PartitionTable, 14.2.5.9 MulticastForwardingTable) and libibmad's field table
//! (`IB_PORT_MKEY_F` @0, `IB_PORT_MKEY_LEASE_F` @26, `IB_PORT_MKEY_PROT_BITS_F` bits 272–273,
//! `IB_PORT_PART_EN_INB_F` / `_OUTB_F` bits 348 / 349, `IB_SW_PARTITION_ENFORCE_CAP_F` @14,
//! `IB_SW_MCAST_FDB_TOP_F` @18).

use super::bytes::{be16, be64, put16, put64};
use super::{PortInfo, Smp, SwitchInfo, ATTR_PORT_INFO, METHOD_SET, SMP_DATA_OFFSET, SMP_DATA_SIZE};

/// Attribute `PartitionTable` (CA port: modifier = block; switch: `port << 16 | block`).
pub const ATTR_PKEY_TABLE: u16 = 0x0016;
/// Attribute `MulticastForwardingTable` (modifier = `position << 28 | block`).
pub const ATTR_MFT: u16 = 0x001B;
/// Entries of one MFT or P_Key block (32 big-endian 16-bit words).
pub const TABLE_BLOCK_ENTRIES: usize = 32;
/// Highest MFT block number the 9-bit block field of the modifier can address.
pub const MAX_MFT_BLOCK: u32 = 0x1ff;
/// Highest MFT position (4-bit field: ports `16·15 .. 16·15+15`).
pub const MAX_MFT_POSITION: u8 = 15;
/// CapabilityMask bit 30 (`IsMulticastFDBTopSupported`): the switch honours
/// SwitchInfo.MulticastFDBTop and drops multicast packets above it (OpenSM then writes it).
pub const CAP_MCAST_FDB_TOP: u32 = 1 << 30;
/// First multicast LID.
pub const MLID_START: u16 = 0xC000;

/// The attribute modifier of MFT block `block`, position `position`.
pub fn mft_modifier(block: u32, position: u8) -> u32 {
    (u32::from(position & 0x0f) << 28) | (block & MAX_MFT_BLOCK)
}

/// The attribute modifier of P_Key block `block` of switch port `port` (0 = the switch's
/// management port); a CA port's table is addressed by `block` alone (the SMP is sent to the
/// port itself).
pub fn pkey_switch_modifier(port: u8, block: u16) -> u32 {
    (u32::from(port) << 16) | u32::from(block)
}

/// The 64 attribute-data bytes of a 32-entry table block (MFT port masks or P_Keys).
pub fn encode_u16_block(entries: &[u16; TABLE_BLOCK_ENTRIES]) -> [u8; SMP_DATA_SIZE] {
    let mut d = [0u8; SMP_DATA_SIZE];
    for (i, e) in entries.iter().enumerate() {
        put16(&mut d, 2 * i, *e);
    }
    d
}

/// The 32 entries of a table block's attribute data.
pub fn decode_u16_block(d: &[u8; SMP_DATA_SIZE]) -> [u16; TABLE_BLOCK_ENTRIES] {
    std::array::from_fn(|i| be16(d, 2 * i))
}

/// M_Key protection of a port, as written into its PortInfo (IBA 14.2.4): the key, the protect
/// bits (0: Gets answer the key to anyone, Sets need it; 1: Gets answer 0 as M_Key without the
/// key; 2 and 3: Gets and Sets both need it) and the lease period in seconds (0: the
/// protection never lapses when the manager stops).
///
/// `Debug` prints no key.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct MKeyProtection {
    /// The M_Key (0: no key).
    pub key: u64,
    /// M_KeyProtectBits (0..=3).
    pub protect: u8,
    /// M_KeyLeasePeriod in seconds.
    pub lease_s: u16,
}

impl std::fmt::Debug for MKeyProtection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MKeyProtection")
            .field("key", &if self.key == 0 { "none" } else { "<redacted>" })
            .field("protect", &self.protect)
            .field("lease_s", &self.lease_s)
            .finish()
    }
}

impl PortInfo {
    /// M_Key (a protected port answers 0 to requesters without the key).
    pub fn m_key(&self) -> u64 {
        be64(&self.raw, 0)
    }
    /// Sets M_Key.
    pub fn set_m_key(&mut self, key: u64) {
        put64(&mut self.raw, 0, key);
    }
    /// M_KeyLeasePeriod (seconds; 0 = infinite).
    pub fn m_key_lease(&self) -> u16 {
        be16(&self.raw, 26)
    }
    /// Sets M_KeyLeasePeriod.
    pub fn set_m_key_lease(&mut self, s: u16) {
        put16(&mut self.raw, 26, s);
    }
    /// M_KeyProtectBits (the two high bits of byte 34, above the LMC).
    pub fn m_key_protect(&self) -> u8 {
        self.raw[34] >> 6
    }
    /// Sets M_KeyProtectBits.
    pub fn set_m_key_protect(&mut self, bits: u8) {
        self.raw[34] = (self.raw[34] & 0x3f) | ((bits & 3) << 6);
    }
    /// Writes the key, protect bits and lease of `p`.
    pub fn set_m_key_protection(&mut self, p: &MKeyProtection) {
        self.set_m_key(p.key);
        self.set_m_key_protect(p.protect);
        self.set_m_key_lease(p.lease_s);
    }
    /// PartitionEnforcementInbound and PartitionEnforcementOutbound (byte 43, masks 0x08 and
    /// 0x04, below OperationalVLs).
    pub fn partition_enforcement(&self) -> (bool, bool) {
        (self.raw[43] & 0x08 != 0, self.raw[43] & 0x04 != 0)
    }
    /// Sets both partition enforcement bits (inbound and outbound) on or off.
    pub fn set_partition_enforcement(&mut self, on: bool) {
        if on {
            self.raw[43] |= 0x0c;
        } else {
            self.raw[43] &= !0x0c;
        }
    }
}

impl SwitchInfo {
    /// PartitionEnforcementCap: entries of the P_Key table of each external port (0: the
    /// switch does not enforce partitions).
    pub fn partition_enforcement_cap(&self) -> u16 {
        be16(&self.raw, 14)
    }
    /// MulticastFDBTop (IBA 1.2.1+; meaningful when port 0 advertises [`CAP_MCAST_FDB_TOP`]).
    pub fn multicast_fdb_top(&self) -> u16 {
        be16(&self.raw, 18)
    }
    /// Sets MulticastFDBTop.
    pub fn set_multicast_fdb_top(&mut self, top: u16) {
        put16(&mut self.raw, 18, top);
    }
    /// Number of MFT blocks the switch holds (MulticastFDBCap / 32, rounded up; at most what the
    /// modifier can address).
    pub fn mft_blocks(&self) -> u32 {
        u32::from(self.multicast_fdb_cap())
            .div_ceil(TABLE_BLOCK_ENTRIES as u32)
            .min(MAX_MFT_BLOCK + 1)
    }
}

/// Puts the manager's M_Key into an outgoing SMP request: the M_Key header field (@24) of every
/// request, and, in a PortInfo Set, the key, protect bits and lease of `p` (every PortInfo Set
/// rewrites them: one written with the fields as read would lift the protection). With no key
/// (`p.key == 0`) the request is left as it is.
pub fn stamp_m_key(smp: &mut Smp, p: &MKeyProtection) {
    if p.key == 0 || !smp.is_request() {
        return;
    }
    put64(&mut smp.bytes, 24, p.key);
    if smp.method() == METHOD_SET && smp.attr_id() == ATTR_PORT_INFO {
        let mut data = [0u8; SMP_DATA_SIZE];
        data.copy_from_slice(&smp.bytes[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE]);
        let mut pi = PortInfo::decode(&data);
        pi.set_m_key_protection(p);
        smp.bytes[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(&pi.raw);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PortState, Route, METHOD_GET};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn modifiers_as_ibsim_and_opensm_decode_them() {
        // ibsim: position = mod >> 28, block = mod & 0x1ff.
        let m = mft_modifier(0x1ab, 3);
        assert_eq!((m >> 28, m & 0x1ff), (3, 0x1ab));
        assert_eq!(mft_modifier(0, 0), 0);
        // ibsim: switch P_Key table: port = mod >> 16, block = mod & 0xffff.
        let m = pkey_switch_modifier(7, 2);
        assert_eq!((m >> 16, m & 0xffff), (7, 2));
    }

    #[test]
    fn port_info_protection_fields_do_not_touch_their_neighbours() {
        let mut p = PortInfo::decode(&[0u8; SMP_DATA_SIZE]);
        p.set_lmc(5);
        p.set_lid(0x42);
        p.set_operational_vls(4);
        p.set_m_key_protection(&MKeyProtection {
            key: 0x0102_0304_0506_0708,
            protect: 3,
            lease_s: 0x0a0b,
        });
        assert_eq!(&p.raw[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&p.raw[26..28], &[0x0a, 0x0b]);
        assert_eq!(p.raw[34], 0xc5, "protect bits 3 above LMC 5");
        assert_eq!((p.lmc(), p.lid(), p.m_key_protect()), (5, 0x42, 3));
        p.set_partition_enforcement(true);
        assert_eq!(p.raw[43], 0x4c);
        assert_eq!(p.partition_enforcement(), (true, true));
        assert_eq!(p.operational_vls(), 4);
        p.set_partition_enforcement(false);
        assert_eq!(p.raw[43], 0x40);
    }

    #[test]
    fn switch_info_table_fields() {
        let mut raw = [0u8; SMP_DATA_SIZE];
        raw[4..6].copy_from_slice(&1024u16.to_be_bytes());
        raw[14..16].copy_from_slice(&64u16.to_be_bytes());
        let mut si = SwitchInfo::decode(&raw);
        assert_eq!((si.mft_blocks(), si.partition_enforcement_cap()), (32, 64));
        si.set_multicast_fdb_top(0xc3ff);
        assert_eq!(&si.raw[18..20], &[0xc3, 0xff]);
        assert_eq!(si.multicast_fdb_top(), 0xc3ff);
        raw[4..6].copy_from_slice(&33u16.to_be_bytes());
        assert_eq!(SwitchInfo::decode(&raw).mft_blocks(), 2, "a partial block counts");
        raw[4..6].copy_from_slice(&0xffffu16.to_be_bytes());
        assert_eq!(SwitchInfo::decode(&raw).mft_blocks(), 512, "bounded by the modifier");
    }

    #[test]
    fn every_request_carries_the_key_and_port_info_sets_keep_the_protection() {
        let p = MKeyProtection {
            key: 0xfeed_0000_beef,
            protect: 2,
            lease_s: 60,
        };
        let mut get = Smp::request(&Route::Directed(vec![1]), METHOD_GET, ATTR_MFT, 0, &[0; 64]).unwrap();
        stamp_m_key(&mut get, &p);
        assert_eq!(get.m_key(), p.key);
        assert!(get.data().iter().all(|&b| b == 0), "a Get's data is left alone");
        let mut pi = PortInfo::decode(&[0; 64]);
        pi.set_lid(9);
        pi.set_state(PortState::Armed);
        let mut set = Smp::request(&Route::Lid(3), METHOD_SET, ATTR_PORT_INFO, 1, &pi.raw).unwrap();
        stamp_m_key(&mut set, &p);
        let got = PortInfo::decode(set.data());
        assert_eq!(
            (set.m_key(), got.m_key(), got.m_key_protect(), got.m_key_lease()),
            (p.key, p.key, 2, 60)
        );
        assert_eq!((got.lid(), got.state()), (9, PortState::Armed));
        // No key: nothing changes (a port without protection is not given M_Key 0 by us
        // either: the fields are written as read).
        let mut plain = Smp::request(&Route::Lid(3), METHOD_SET, ATTR_PORT_INFO, 1, &pi.raw).unwrap();
        let before = plain.clone();
        stamp_m_key(&mut plain, &MKeyProtection::default());
        assert_eq!(plain, before);
        assert!(!format!("{p:?}").contains("feed"), "{p:?}");
    }

    proptest! {
        #[test]
        fn table_blocks_round_trip(entries in proptest::array::uniform32(any::<u16>())) {
            let d = encode_u16_block(&entries);
            prop_assert_eq!(decode_u16_block(&d), entries);
            // Big-endian: entry i at bytes 2i, 2i+1.
            for (i, e) in entries.iter().enumerate() {
                prop_assert_eq!(u16::from_be_bytes([d[2 * i], d[2 * i + 1]]), *e);
            }
        }

        #[test]
        fn mft_modifier_keeps_block_and_position(block in 0u32..=MAX_MFT_BLOCK, pos in 0u8..=MAX_MFT_POSITION) {
            let m = mft_modifier(block, pos);
            prop_assert_eq!(m & 0x1ff, block);
            prop_assert_eq!((m >> 28) as u8, pos);
            prop_assert_eq!(m & 0x0fff_fe00, 0);
        }
    }
}
