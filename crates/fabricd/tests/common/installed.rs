//! What a daemon installed, read back over gRPC and from its state directory: its LID plan, its
//! tables as dense rows of a fabric, and the PathRecords its SA answers (for the VL-layering
//! tests: DFSSSP, layered multipath).

use std::collections::HashMap;

use fabric_proto::v1 as pb;
use fabric_routing::{assign_lids, Guid2Lid, Lfts, LidPlan};
use fabric_topology::Fabric;

use super::Daemon;

/// The daemon's LID plan (LMC `lmc`), from its state directory's record.
pub fn lid_plan(d: &Daemon, f: &Fabric, lmc: u8) -> LidPlan {
    let text = std::fs::read_to_string(d.state.join("guid2lid")).expect("guid2lid");
    let g = Guid2Lid::parse(&text, "guid2lid").expect("parse guid2lid");
    assign_lids(f, &g, lmc, 0xbfff).expect("the recorded LIDs")
}

/// The installed tables (GetLft) as dense rows of `f`.
pub fn tables(f: &Fabric, lids: &LidPlan, rows: &HashMap<u64, Vec<u8>>) -> Lfts {
    let mut t = Lfts::new(f.num_switches(), lids.top());
    for s in f.switch_ids() {
        let row = rows.get(&f.switch(s).guid).expect("a table per switch");
        let n = row.len().min(t.row_len());
        t.row_mut(s)[..n].copy_from_slice(&row[..n]);
    }
    t
}

/// PathRecords from end port `src` to every destination (GetTable by SGID).
pub async fn paths_from(c: &mut fabric_proto::Client, src_guid: u64) -> Vec<(u16, u64, u8)> {
    let mut t = vec![0u8; 64];
    t[24..32].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    t[32..40].copy_from_slice(&src_guid.to_be_bytes());
    let r = c
        .sa_query(pb::SaQueryRequest {
            method: pb::SaMethod::GetTable as i32,
            attribute: "PathRecord".into(),
            component_mask: 1 << 3,
            template: t,
            ..Default::default()
        })
        .await
        .expect("SaQuery")
        .into_inner();
    assert_eq!(r.status, 0, "{r:?}");
    r.records
        .iter()
        .map(|x| {
            let b = &x.raw;
            let dlid = u16::from_be_bytes([b[40], b[41]]);
            let dguid = u64::from_be_bytes(b[16..24].try_into().unwrap());
            (dlid, dguid, b[53] & 0x0f)
        })
        .collect()
}

/// [`paths_from`] once the SA answers (its snapshot follows a commit by a moment): panics after
/// 5 s without a record.
pub async fn paths_from_when_ready(c: &mut fabric_proto::Client, src_guid: u64, what: &str) -> Vec<(u16, u64, u8)> {
    for _ in 0..200 {
        let recs = paths_from(c, src_guid).await;
        if !recs.is_empty() {
            return recs;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("no PathRecord from {what}");
}
