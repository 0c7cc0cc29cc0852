//! Arbitrary PathRecord / MultiPathRecord MADs (any method, mask and data, truncated or not)
//! and arbitrarily damaged snapshots (PortInfo images, LFT entries) never make the path
//! answers panic: every request gets a response of the request's attribute family, with a
//! status and whole records.

mod path_support;

use fabric_sa::path::walk;
use fabric_sa::wire::{attr, SA_HEADER_SIZE};
use fabric_topology::gen::generate_str;
use path_support::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_requests_get_an_answer(
        multi in any::<bool>(),
        method in prop_oneof![Just(0x01u8), Just(0x12), Just(0x14), Just(0x02), any::<u8>()],
        mask in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 0..400),
        // Make some requests name real LIDs and GUIDs.
        lids in (1u16..40, 1u16..40),
    ) {
        let r = routed(generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap());
        let attr_id = if multi { attr::MULTI_PATH_RECORD } else { attr::PATH_RECORD };
        let mut data = data;
        if !multi && data.len() >= 64 {
            data[40..42].copy_from_slice(&lids.0.to_be_bytes());
            data[42..44].copy_from_slice(&lids.1.to_be_bytes());
        }
        let mut m = mad(method, attr_id, mask, &data);
        m.truncate(SA_HEADER_SIZE + data.len());
        let a = ask(&r.subnet, &m);
        prop_assert_eq!(a.header.method & 0x80, 0x80);
        if a.header.status == 0 {
            prop_assert_eq!(a.header.attr_id, attr::PATH_RECORD);
            prop_assert_eq!(a.data.len() % 64, 0);
        }
    }

    #[test]
    fn damaged_snapshots_are_walked_without_panic(
        damage in proptest::collection::vec((any::<usize>(), 0usize..64, any::<u8>()), 0..40),
        lft in proptest::collection::vec((any::<usize>(), any::<u16>(), any::<u8>()), 0..40),
    ) {
        let r = routed(generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap());
        let mut s = r.subnet.clone();
        for (p, byte, v) in damage {
            let n = s.ports.len();
            s.ports_mut()[p % n].port_info[byte] = v;
        }
        for (n, lid, port) in lft {
            let nodes = s.nodes.len();
            let n = (n % nodes) as u32;
            let e = usize::from(lid) % 64;
            if let Some(mut block) = s.lft(n).filter(|t| e < t.len()).map(|t| t.block(0)) {
                block[e] = port;
                s.lft_mut(n).unwrap().write_block(0, &block);
            }
        }
        s.reindex();
        for src in 0..s.ports.len() as u32 {
            for lid in 0..48u16 {
                let _ = walk(&s, src, lid);
            }
        }
        let whole = ask(&s, &mad(0x12, attr::PATH_RECORD, 0, &[0; 64]));
        prop_assert_eq!(whole.data.len() % 64, 0);
    }
}
