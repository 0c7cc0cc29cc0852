//! Disguising a generated fabric as a real dump (issue #16: structural recognition by Dmodk and
//! PQFT): other names, GUIDs, port numbers and record order, through an `ibnetdiscover` dump.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use fabric_topology::{Fabric, FabricBuilder, NodeType, Remote, SwitchId};

/// `f` rebuilt with other switch and end-port GUIDs, names unlike the generator's, switches
/// and end ports in a random order, more ports per switch and the ports of every switch
/// randomly renumbered; then written as an ibnetdiscover dump and parsed back. With
/// `keep_order`, the new switch GUIDs are in the same order as the old ones (random gaps),
/// otherwise random.
pub fn disguise(f: &Fabric, seed: u64, keep_order: bool) -> Fabric {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut by_guid: Vec<SwitchId> = f.switch_ids().collect();
    by_guid.sort_by_key(|&s| f.switch(s).guid);
    let mut new_guid = vec![0u64; f.num_switches()];
    let mut g = 0x0008_f104_0000_0000u64;
    for &s in &by_guid {
        g += rng.gen_range(1..1u64 << 24);
        new_guid[s.idx()] = if keep_order {
            g
        } else {
            0x0008_f104_0000_0000 | u64::from(rng.gen::<u32>()) << 8 | s.idx() as u64 & 0xff
        };
    }
    let mut b = FabricBuilder::new();
    let mut order: Vec<SwitchId> = f.switch_ids().collect();
    order.shuffle(&mut rng);
    let mut new_id = vec![SwitchId(0); f.num_switches()];
    let mut port_map: Vec<Vec<u8>> = vec![Vec::new(); f.num_switches()];
    for (k, &s) in order.iter().enumerate() {
        let sw = f.switch(s);
        let nports = sw.nports + 4;
        let mut perm: Vec<u8> = (1..=nports).collect();
        perm.shuffle(&mut rng);
        // port_map[s][old port] = new port.
        port_map[s.idx()] = std::iter::once(0).chain(perm).collect();
        new_id[s.idx()] = b
            .add_switch(new_guid[s.idx()], format!("MF0;ib-sw{k:03}:IS5030/U1"), nports)
            .unwrap();
    }
    let mut eps: Vec<_> = f.end_port_ids().collect();
    eps.shuffle(&mut rng);
    for (k, &e) in eps.iter().enumerate() {
        let ep = f.end_port(e);
        let node = 0x0002_c903_0000_0000 | u64::from(rng.gen::<u32>()) << 16 | (k as u64) << 1;
        let id = b
            .add_end_port(node + 1, node, format!("node{k:04} HCA-1"), 1, 1, NodeType::Compute)
            .unwrap();
        let (sw, pn) = ep.attach.unwrap();
        b.connect_end_port(id, new_id[sw.idx()], port_map[sw.idx()][pn as usize])
            .unwrap();
    }
    for s in f.switch_ids() {
        for (pn, p) in f.switch(s).external_ports() {
            if let Remote::Switch { sw, port } = p.remote {
                if (s, pn) < (sw, port) {
                    b.connect_switches(
                        new_id[s.idx()],
                        port_map[s.idx()][pn as usize],
                        new_id[sw.idx()],
                        port_map[sw.idx()][port as usize],
                    )
                    .unwrap();
                }
            }
        }
    }
    let text = fabric_topology::ibnet::write(&b.build());
    fabric_topology::ibnet::parse(&text, "disguised").unwrap().fabric
}
