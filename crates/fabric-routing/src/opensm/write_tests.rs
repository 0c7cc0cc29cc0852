use proptest::prelude::*;

use super::*;
use crate::opensm::parse_opensm_lfts;
use crate::testutil::*;
use crate::{EngineKind, IB_MAX_UNICAST_LID};
use fabric_topology::fmt_guid;

/// The writer as it was before streaming (one `format!` per line): the reference output.
fn reference(fabric: &Fabric, lids: &LidPlan, lfts: &Lfts) -> String {
    let clean = |s: &str| s.replace(['\n', '\r'], " ");
    let owners = LidOwners::new(lids);
    let top = lids.top().min(lfts.row_len().saturating_sub(1) as Lid);
    let mut order: Vec<SwitchId> = fabric
        .switch_ids()
        .filter(|&s| {
            fabric.switch(s).up
                && s.idx() < lfts.num_switches()
                && lids.switch_lid.get(s.idx()).is_some_and(|&l| l != 0)
        })
        .collect();
    order.sort_by_key(|&s| fabric.switch(s).guid);
    let comment: Vec<String> = (0..=top)
        .map(|lid| match owners.get(lid) {
            Some(LidOwner::EndPort { ep, .. }) => {
                let e = fabric.end_port(ep);
                format!(
                    "Channel Adapter portguid {}: '{}'",
                    fmt_guid(e.port_guid),
                    clean(&e.desc)
                )
            }
            Some(LidOwner::Switch(s)) => {
                let sw = fabric.switch(s);
                format!("Switch portguid {}: '{}'", fmt_guid(sw.guid), clean(&sw.desc))
            }
            None => "unknown node and type".to_string(),
        })
        .collect();
    let mut out = String::new();
    for s in order {
        let sw = fabric.switch(s);
        out.push_str(&format!(
            "Unicast lids [0-{top}] of switch Lid {} guid {} ('{}'):\n",
            lids.switch_lid(s),
            fmt_guid(sw.guid),
            clean(&sw.desc)
        ));
        let row = lfts.row(s);
        for lid in 0..=top {
            let port = row[lid as usize];
            if port == NO_ROUTE || port > sw.nports {
                continue;
            }
            out.push_str(&format!("0x{lid:04x} {port:03} # {}\n", comment[lid as usize]));
        }
        out.push_str(&format!("{top} lids dumped\n"));
    }
    out
}

/// Records every `write` call: the writer must hand over whole lines.
struct Chunks(Vec<Vec<u8>>);

impl Write for Chunks {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.push(b.to_vec());
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn streamed_dump_equals_the_string_dump_on_a_degraded_fabric() {
    let t = pgft(&[4, 4, 3], &[1, 4, 2], &[1, 1, 2]);
    let f = degrade(&t.fabric, 6, 2, 7);
    for lmc in [0, 1] {
        let (_, lids, lfts) = routed(&f, EngineKind::Dmodc, lmc);
        let want = reference(&f, &lids, &lfts);
        assert_eq!(write_opensm_lfts(&f, &lids, &lfts), want);
        let mut chunks = Chunks(Vec::new());
        write_opensm_lfts_to(&mut chunks, &f, &lids, &lfts).unwrap();
        assert!(chunks.0.iter().all(|c| c.ends_with(b"\n")));
        assert_eq!(String::from_utf8(chunks.0.concat()).unwrap(), want);
        let back = parse_opensm_lfts(&want, "d")
            .unwrap()
            .to_lfts(&f, IB_MAX_UNICAST_LID)
            .unwrap();
        let w = OpensmLftWriter::new(&f, &lids, &lfts);
        for &s in w.switches() {
            for lid in 0..=w.top() {
                let p = lfts.get(s, lid);
                let p = if p > f.switch(s).nports { NO_ROUTE } else { p };
                assert_eq!(back.get(s, lid), p);
            }
        }
    }
}

#[test]
fn one_switch_section_and_big_dumps_flush_in_whole_lines() {
    let t = pgft(&[8, 8], &[1, 8], &[1, 1]);
    let f = &t.fabric;
    let (_, mut lids, _) = routed(f, EngineKind::Dmodc, 1);
    // Spread the LIDs into the 24-bit space: five and six hex digits, unowned LIDs between.
    for l in lids.switch_lid.iter_mut().chain(lids.end_port_base.iter_mut()) {
        *l = *l * 4099 + 0x1_0000;
    }
    let mut lfts = Lfts::new(f.num_switches(), lids.top());
    for (i, b) in lfts.rows_mut().flatten().enumerate() {
        *b = [0, 1, 3, 7, 9, NO_ROUTE][i % 6];
    }
    let want = reference(f, &lids, &lfts);
    assert!(want.len() > 2 * FLUSH_BYTES, "{}", want.len());
    assert!(want.contains("\n0x10000 ") && want.contains("unknown node and type"));
    let mut chunks = Chunks(Vec::new());
    write_opensm_lfts_to(&mut chunks, f, &lids, &lfts).unwrap();
    assert!(chunks.0.len() > 2);
    assert!(chunks
        .0
        .iter()
        .all(|c| c.ends_with(b"\n") && c.len() < FLUSH_BYTES + 4096));
    assert_eq!(String::from_utf8(chunks.0.concat()).unwrap(), want);
    let w = OpensmLftWriter::new(f, &lids, &lfts);
    let s = w.switches()[3];
    let mut one = Vec::new();
    w.write_switch(s, &mut one).unwrap();
    let one = String::from_utf8(one).unwrap();
    let needle = format!("guid {} ", fmt_guid(f.switch(s).guid));
    let start = want.find(&needle).unwrap();
    let start = want[..start].rfind("Unicast").unwrap();
    assert!(want[start..].starts_with(&one));
    assert!(one.ends_with(" lids dumped\n") && one.matches("Unicast").count() == 1);
}

fn arb_case() -> impl Strategy<Value = (u64, u8, u32, Vec<u8>, String)> {
    (
        any::<u64>(),
        0u8..=1,
        prop_oneof![Just(1u32), 1u32..300, 0x3000u32..0x5000],
        prop::collection::vec(prop_oneof![0u8..6, Just(NO_ROUTE), any::<u8>()], 1..64),
        "[a-z \n\r'é]{0,12}",
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn streamed_dump_equals_the_reference((seed, lmc, scale, ports, desc) in arb_case()) {
        let t = pgft(&[3, 4], &[1, 3], &[1, 2]);
        let f = degrade(&t.fabric, (seed % 4) as usize, (seed % 2) as usize, seed);
        let (_, mut lids, _) = routed(&f, EngineKind::Dmodc, lmc);
        for l in lids.switch_lid.iter_mut().chain(lids.end_port_base.iter_mut()) {
            if *l != 0 {
                *l = *l * scale + 1;
            }
        }
        let mut lfts = Lfts::new(f.num_switches(), lids.top());
        for (i, b) in lfts.rows_mut().flatten().enumerate() {
            *b = ports[i % ports.len()];
        }
        let want = reference(&f, &lids, &lfts);
        prop_assert_eq!(write_opensm_lfts(&f, &lids, &lfts), want);
        // Descriptions with quotes, newlines and non-ASCII text, on a switch and its end ports.
        let mut b = fabric_topology::FabricBuilder::new();
        let sw = b.add_switch(0x10, format!("sw{desc}"), 4).unwrap();
        for i in 0..3u8 {
            let ep = b
                .add_end_port(0x100 + u64::from(i), 0x200 + u64::from(i), format!("{desc}{i}"), 1, 1, fabric_topology::NodeType::Compute)
                .unwrap();
            b.connect_end_port(ep, sw, i + 1).unwrap();
        }
        let f = b.build();
        let lids = LidPlan {
            lmc,
            max_lid: IB_MAX_UNICAST_LID,
            switch_lid: vec![scale],
            end_port_base: vec![scale + 2, 0, scale + 6],
        };
        let mut lfts = Lfts::new(1, lids.top());
        for (i, b) in lfts.rows_mut().flatten().enumerate() {
            *b = ports[i % ports.len()];
        }
        prop_assert_eq!(write_opensm_lfts(&f, &lids, &lfts), reference(&f, &lids, &lfts));
    }
}
