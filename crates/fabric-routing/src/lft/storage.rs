//! The bytes of an LFT set ([`super::Lfts`]): a `Vec<u8>` for small tables; for large ones
//! (≥ [`HUGE_MIN`]) an anonymous private mapping advised for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)` through `memmap2`, the workspace forbids `unsafe`). A fresh
//! 0.3–0.7 GB table is mostly first-touch page faults: with 2 MiB pages there are 512× fewer,
//! which on this machine's kernel (`transparent_hugepage = madvise`) cut the first write of
//! 285 MB from ~230 to ~50 ms of CPU (issue #17). Where the mapping or the advice fails (no
//! THP, another OS), the bytes are the same, only slower to fault in.

use std::ops::{Deref, DerefMut};

/// Smallest table that gets a huge-page mapping (below it, page faults are negligible).
pub(super) const HUGE_MIN: usize = 8 << 20;

/// `len` bytes, zeroed when made, in a `Vec` or (large) a mapping of at least `len` bytes.
pub(super) enum Bytes {
    Vec(Vec<u8>),
    Map { map: memmap2::MmapMut, len: usize },
}

impl Bytes {
    /// `len` zero bytes (untouched pages: faulted in by the first write).
    pub(super) fn zeroed(len: usize) -> Self {
        if len >= HUGE_MIN {
            if let Ok(map) = memmap2::MmapMut::map_anon(len) {
                // Best effort: without THP the mapping works with small pages.
                let _ = map.advise(memmap2::Advice::HugePage);
                return Bytes::Map { map, len };
            }
        }
        Bytes::Vec(vec![0; len])
    }

    /// `len` bytes in the allocation of `self` when it is large enough (the contents are then
    /// the old bytes, or 0 past the old length), else [`Bytes::zeroed`].
    pub(super) fn resized(self, len: usize) -> Self {
        match self {
            Bytes::Vec(mut v) if len < HUGE_MIN || v.len() >= len => {
                v.truncate(len);
                v.resize(len, 0);
                Bytes::Vec(v)
            }
            Bytes::Map { mut map, len: old } if map.len() >= len && len >= HUGE_MIN => {
                // A mapping shrunk earlier still holds its old bytes past `old`: zero them.
                if len > old {
                    map[old..len].fill(0);
                }
                Bytes::Map { map, len }
            }
            _ => Bytes::zeroed(len),
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Vec(v) => v,
            Bytes::Map { map, len } => &map[..*len],
        }
    }
}

impl DerefMut for Bytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Bytes::Vec(v) => v,
            Bytes::Map { map, len } => &mut map[..*len],
        }
    }
}

impl Clone for Bytes {
    fn clone(&self) -> Self {
        let mut b = Bytes::zeroed(self.len());
        b.copy_from_slice(self);
        b
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_bytes_are_mapped_zeroed_and_behave_as_a_vec() {
        let n = HUGE_MIN + 12_345;
        let mut b = Bytes::zeroed(n);
        assert!(matches!(b, Bytes::Map { .. }), "a large table is a mapping");
        assert_eq!(b.len(), n);
        assert!(b.iter().all(|&x| x == 0));
        b[n - 1] = 7;
        let c = b.clone();
        assert_eq!(c, b);
        // Smaller within the same mapping keeps the bytes; larger than it starts zeroed.
        let d = c.resized(n - 1_000);
        assert!(matches!(d, Bytes::Map { .. }));
        assert_eq!(d.len(), n - 1_000);
        // Growing again inside the same mapping zeroes what the shrink left behind.
        let mut g = Bytes::zeroed(n);
        g[n - 1] = 9;
        g[n - 1_500] = 9;
        let h = g.resized(n - 2_000).resized(n);
        assert!(matches!(h, Bytes::Map { .. }), "the mapping is reused");
        assert!(
            h[n - 2_000..].iter().all(|&x| x == 0),
            "bytes past the shrunk length are zero"
        );
        let e = d.resized(2 * n);
        assert_eq!(e.len(), 2 * n);
        assert!(e.iter().all(|&x| x == 0));
        let small = Bytes::zeroed(100).resized(200);
        assert!(matches!(small, Bytes::Vec(_)));
        assert_eq!(&*small, &[0u8; 200][..]);
    }
}
