//! P_Key values.

/// The default partition's P_Key (limited form; `0xFFFF` is its full form).
pub const DEFAULT_PKEY: u16 = 0x7fff;
/// Bit 15 of a P_Key table entry: set for a full member, clear for a limited member.
pub const FULL_MEMBER_BIT: u16 = 0x8000;
/// The low 15 bits of a P_Key: the partition.
pub const PKEY_BASE_MASK: u16 = 0x7fff;

/// The 15-bit partition of a table entry.
pub(crate) fn base(entry: u16) -> u16 {
    entry & PKEY_BASE_MASK
}
