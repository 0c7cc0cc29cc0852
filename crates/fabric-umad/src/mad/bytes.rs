//! Big-endian field access in MAD images, and [`debug_fields!`], the `Debug` of the types kept
//! as raw images (the fields shown are accessor values).

pub(super) fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
pub(super) fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
pub(super) fn be64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_be_bytes(a)
}
pub(super) fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_be_bytes());
}
pub(super) fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_be_bytes());
}
pub(super) fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_be_bytes());
}

/// `impl Debug for $ty` as a struct whose fields are accessor values:
/// `debug_fields!(PortInfo { lid, width_active = link_width_active })` shows `lid` as
/// `self.lid()` and `width_active` as `self.link_width_active()`.
macro_rules! debug_fields {
    ($ty:ident { $($name:ident $(= $getter:ident)?),* $(,)? }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($name), &debug_fields!(@get self $name $($getter)?)))*
                    .finish()
            }
        }
    };
    (@get $s:ident $name:ident) => {
        $s.$name()
    };
    (@get $s:ident $name:ident $getter:ident) => {
        $s.$getter()
    };
}
pub(super) use debug_fields;
