//! Throughput of the mock driver on a generated fat-tree: uploading every LFT block
//! (`write_lft_blocks`, zero latency) and checking all pairs (`verify_all_pairs`); then one
//! broadcast group of every end port (a BFS tree from switch 0 installed as MFT blocks) and
//! floods of it (`flood_multicast`).
//!
//! Run: `cargo bench -p fabric-mock --bench mock_verify [-- SPEC]` (default
//! `XGFT(3;16,16,16;1,16,16)`: 4096 end ports, 768 switches). LFTs are min-hop routes computed
//! here by BFS (not a routing engine under test), base and escape LIDs routed alike.

use std::collections::VecDeque;
use std::time::Instant;

use fabric_mock::{MockFabric, IB_MAX_UNICAST_LID};
use fabric_routing::{LidPlan, BLOCK_SIZE, NO_ROUTE};
use fabric_southbound::{LftBlockWrite, MftBlockWrite, SouthboundDriver, MFT_BLOCK_SIZE};
use fabric_topology::{Fabric, Lid, PortNum, Remote, SwitchId};

fn plan(f: &Fabric) -> LidPlan {
    let end_port_base: Vec<Lid> = (0..f.num_end_ports() as Lid).map(|i| 2 + 2 * i).collect();
    let first = 2 + 2 * f.num_end_ports() as Lid;
    let switch_lid = (0..f.num_switches() as Lid).map(|i| first + i).collect();
    LidPlan {
        lmc: 1,
        max_lid: IB_MAX_UNICAST_LID,
        switch_lid,
        end_port_base,
    }
}

fn min_hop_blocks(f: &Fabric, p: &LidPlan) -> Vec<LftBlockWrite> {
    let row = (p.top() as usize + 1).div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
    let mut rows = vec![vec![NO_ROUTE; row]; f.num_switches()];
    let mut dests: Vec<(Lid, SwitchId, PortNum)> = Vec::new();
    for ep in f.end_port_ids() {
        if let Some((sw, port)) = f.end_port(ep).attach {
            dests.push((p.base_lid(ep), sw, port));
            dests.push((p.base_lid(ep) + 1, sw, port));
        }
    }
    dests.extend(f.switch_ids().map(|s| (p.switch_lid(s), s, 0)));
    let mut seen = vec![false; f.num_switches()];
    let mut q = VecDeque::new();
    for (lid, dsw, dport) in dests {
        seen.iter_mut().for_each(|x| *x = false);
        rows[dsw.idx()][lid as usize] = dport;
        seen[dsw.idx()] = true;
        q.push_back(dsw);
        while let Some(s) = q.pop_front() {
            for (_, port) in f.switch(s).external_ports() {
                if let Remote::Switch { sw: r, port: rp } = port.remote {
                    if !seen[r.idx()] {
                        seen[r.idx()] = true;
                        rows[r.idx()][lid as usize] = rp;
                        q.push_back(r);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for (b, chunk) in r.chunks(BLOCK_SIZE).enumerate() {
            let mut entries = [NO_ROUTE; BLOCK_SIZE];
            entries.copy_from_slice(chunk);
            out.push(LftBlockWrite {
                switch: f.switch(SwitchId(i as u32)).guid,
                block: b as u32,
                entries,
            });
        }
    }
    out
}

/// MFT blocks of MLID 0xC000 (block 0, entry 0): a BFS tree from switch 0 over every cable,
/// every end port a member.
fn broadcast_mft(f: &Fabric) -> Vec<MftBlockWrite> {
    let mut masks: Vec<Vec<PortNum>> = vec![Vec::new(); f.num_switches()];
    let mut seen = vec![false; f.num_switches()];
    seen[0] = true;
    let mut q = VecDeque::from([SwitchId(0)]);
    while let Some(s) = q.pop_front() {
        for (pn, port) in f.switch(s).external_ports() {
            match port.remote {
                Remote::Switch { sw: r, port: rp } if !seen[r.idx()] => {
                    seen[r.idx()] = true;
                    masks[s.idx()].push(pn);
                    masks[r.idx()].push(rp);
                    q.push_back(r);
                }
                Remote::EndPort(_) => masks[s.idx()].push(pn),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for (i, ports) in masks.iter().enumerate() {
        let positions = f.switch(SwitchId(i as u32)).nports as usize / 16 + 1;
        for position in 0..positions {
            let mut entries = [0u16; MFT_BLOCK_SIZE];
            for &p in ports.iter().filter(|&&p| p as usize / 16 == position) {
                entries[0] |= 1 << (p % 16);
            }
            out.push(MftBlockWrite {
                switch: f.switch(SwitchId(i as u32)).guid,
                block: 0,
                position: position as u8,
                entries,
            });
        }
    }
    out
}

fn main() {
    let spec = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "XGFT(3;16,16,16;1,16,16)".into());
    let mock = MockFabric::from_generator(&spec, None).expect("generator spec");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let f = rt.block_on(mock.discover()).expect("discover");
    let p = plan(&f);
    let blocks = min_hop_blocks(&f, &p);
    rt.block_on(mock.configure_lids(&f, &p)).expect("lids");

    let t = Instant::now();
    let r = rt.block_on(mock.write_lft_blocks(&blocks)).expect("upload");
    let upload = t.elapsed();
    println!(
        "{spec}: {} switches, {} end ports; upload {} blocks in {:.1} ms ({:.0} blocks/s)",
        f.num_switches(),
        f.num_end_ports(),
        r.blocks_written,
        upload.as_secs_f64() * 1e3,
        r.blocks_written as f64 / upload.as_secs_f64()
    );
    for escape in [false, true] {
        let t = Instant::now();
        let rep = mock.verify_all_pairs(escape);
        let el = t.elapsed();
        assert_eq!(rep.unreachable_count, 0, "{:?}", rep.unreachable.first());
        println!(
            "verify_all_pairs(escape={escape}): {} pairs in {:.1} ms ({:.1} M pairs/s, {} rayon threads)",
            rep.pairs_checked,
            el.as_secs_f64() * 1e3,
            rep.pairs_checked as f64 / el.as_secs_f64() / 1e6,
            rayon::current_num_threads()
        );
    }
    let src = f.end_port(fabric_topology::EndPortId(0)).port_guid;
    let dst = p.base_lid(fabric_topology::EndPortId(f.num_end_ports() as u32 - 1));
    let t = Instant::now();
    let n = 10_000;
    for _ in 0..n {
        std::hint::black_box(mock.trace(src, dst).expect("trace"));
    }
    println!(
        "trace: {:.2} µs per trace",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    );

    let mft = broadcast_mft(&f);
    let t = Instant::now();
    let r = rt.block_on(mock.write_mft_blocks(&mft)).expect("MFT upload");
    println!(
        "MFT upload: {} blocks in {:.2} ms",
        r.blocks_written,
        t.elapsed().as_secs_f64() * 1e3
    );
    let n = 100;
    let t = Instant::now();
    for _ in 0..n {
        let d = mock.flood_multicast(src, 0xC000).expect("flood");
        assert_eq!(d.received.len(), f.num_end_ports() - 1);
        std::hint::black_box(d);
    }
    println!(
        "flood_multicast (broadcast to {} end ports): {:.1} µs per flood",
        f.num_end_ports() - 1,
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    );
}
