//! LMC 2 through the daemon (mock driver, real `fabricd`, gRPC): `[routing] lmc = 2` gives every
//! end port 4 aligned LIDs, 3 layer LIDs (base paths, SL 0) and the escape LID as the last
//! offset (escape SL); the SA's PathRecords with NumbPath 3 answer the 3 base paths of a pair on
//! distinct DLIDs, and the 4th is the escape path (as saquery -p with num_path would print).
//!
//! PathRecord images are read at IBA vol. 1 15.2.5.16: DLID 40..42, SLID 42..44, NumbPath at
//! 49 (low 7 bits), SL the low 4 bits of 53.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use fabric_proto::Client;

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";
const MASK_DGID: u64 = 1 << 2;
const MASK_SGID: u64 = 1 << 3;
const MASK_NUMB_PATH: u64 = 1 << 12;

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

fn gid(guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// GetTable PathRecord from port GUID `s` to port GUID `d` with NumbPath `n`: (SLID, DLID, SL).
async fn paths(c: &mut Client, s: u64, d: u64, n: u8) -> Result<Vec<(u16, u16, u8)>, String> {
    let mut t = vec![0u8; 64];
    t[8..24].copy_from_slice(&gid(d));
    t[24..40].copy_from_slice(&gid(s));
    t[49] = n;
    let r = c
        .sa_query(pb::SaQueryRequest {
            method: pb::SaMethod::GetTable as i32,
            attribute: "PathRecord".into(),
            component_mask: MASK_DGID | MASK_SGID | MASK_NUMB_PATH,
            template: t,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("{e:?}"))?
        .into_inner();
    if r.status != 0 {
        return Err(format!("status {:#06x}", r.status));
    }
    Ok(r.records
        .iter()
        .map(|x| (be16(&x.raw, 42), be16(&x.raw, 40), x.raw[53] & 0x0f))
        .collect())
}

#[test]
fn lmc_2_pathrecords_give_three_base_paths_on_distinct_dlids_then_the_escape() {
    run_with_deadline(180, async {
        let dir = test_dir("lmc2");
        let mut opts = Opts::new(SMALL);
        opts.extra = "[routing]\nlmc = 2\n".into();
        let d = Daemon::spawn(&dir, &opts, &[]);
        let mut c = d.ready().await;
        let status = c
            .get_status(pb::GetStatusRequest {})
            .await
            .expect("status")
            .into_inner();
        assert_eq!(status.lmc, 2, "{status:?}");
        let t = topology(&mut c).await;
        for e in &t.end_ports {
            assert_eq!(e.base_lid % 4, 0, "{} base LID {} not aligned to 4", e.name, e.base_lid);
            assert_eq!(
                e.escape_lid,
                e.base_lid + 3,
                "{}: the escape is the last offset",
                e.name
            );
        }
        let a = &t.end_ports[0];
        let others: Vec<_> = t.end_ports.iter().filter(|e| e.guid != a.guid).take(8).collect();
        // The SA snapshot follows the first commit a moment later.
        let started = Instant::now();
        let mut first = paths(&mut c, a.guid, others[0].guid, 3).await;
        while !matches!(&first, Ok(v) if v.len() == 3) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the SA never answered 3 paths: {first:?}; log:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
            first = paths(&mut c, a.guid, others[0].guid, 3).await;
        }
        let (sa, la) = (a.base_lid as u16, a.base_lid as u16);
        for b in others {
            let db = b.base_lid as u16;
            let got = paths(&mut c, a.guid, b.guid, 3).await.expect("paths");
            assert_eq!(
                got,
                vec![(sa, db, 0), (sa + 1, db + 1, 0), (sa + 2, db + 2, 0)],
                "{} -> {}: 3 base paths on the layer LIDs (equal offsets first), SL 0",
                a.name,
                b.name
            );
            let four = paths(&mut c, a.guid, b.guid, 4).await.expect("paths");
            assert_eq!(four.len(), 4);
            let (s4, d4, sl4) = four[3];
            assert_eq!((s4, d4), (la + 3, db + 3), "the escape pair comes 4th");
            assert_ne!(sl4, 0, "the escape path is on the escape SL");
            // Every one of the 16 LID pairs is answered (the tables deliver every offset).
            let all = paths(&mut c, a.guid, b.guid, 127).await.expect("paths");
            assert_eq!(all.len(), 16, "{all:?}");
        }
        // The daemon's own walk: every pair delivered on the base and on the escape LIDs.
        for escape in [false, true] {
            let v = c
                .verify_reachability(pb::VerifyReachabilityRequest { escape })
                .await
                .expect("VerifyReachability")
                .into_inner();
            assert!(
                v.pairs_checked > 0 && v.unreachable_count == 0,
                "escape {escape}: {v:?}"
            );
        }
    });
}
