//! `--tables SEED`: multicast forwarding and partition tables written through the driver and
//! read back through it, for the integration tests to compare with `ibroute -M` and
//! `smpquery pkeys`.
//!
//! * MFTs: on every switch, blocks 0 and 1 of every position the switch has, port masks drawn
//!   from `SEED` over the switch's ports (bit 0 of position 0 = port 0).
//! * P_Keys: the CA ports of odd index (in discovery order) are members of partition
//!   [`MEMBER_PKEY`] (full); every CA port keeps the default partition `0xffff` in entry 0.
//!   The switch ports cabled to members get an enforcement table `[0xffff, MEMBER_PKEY]`
//!   (partition enforcement bits set by the driver).

use std::collections::BTreeMap;

use anyhow::{ensure, Result};
use fabric_southbound::{MftBlockWrite, PkeyBlockWrite, PkeyPort, SouthboundDriver, MFT_BLOCK_SIZE, PKEY_BLOCK_SIZE};
use fabric_topology::{fmt_guid, Fabric, Remote};
use fabric_umad::UmadDriver;
use serde_json::{json, Value};

/// The P_Key of the members (full membership bit set).
pub const MEMBER_PKEY: u16 = 0x8001;
/// The default partition, full.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// A small deterministic generator (the tables only need to differ between entries).
fn next(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *x >> 33
}

/// The MFT blocks of `fabric` for `seed`.
fn mft_blocks(fabric: &Fabric, seed: u64) -> Vec<MftBlockWrite> {
    let mut x = seed | 1;
    let mut out = Vec::new();
    for sw in fabric.switch_ids() {
        let s = fabric.switch(sw);
        let nports = u16::from(s.nports);
        for position in 0..=(nports / 16) as u8 {
            let first = u16::from(position) * 16;
            let valid: u16 = (0..16u16).filter(|b| first + b <= nports).fold(0, |m, b| m | (1 << b));
            for block in 0..2u32 {
                let entries: [u16; MFT_BLOCK_SIZE] = std::array::from_fn(|_| {
                    // About one MLID in three is unused (mask 0).
                    if next(&mut x).is_multiple_of(3) {
                        0
                    } else {
                        (next(&mut x) as u16) & valid
                    }
                });
                out.push(MftBlockWrite {
                    switch: s.guid,
                    block,
                    position,
                    entries,
                });
            }
        }
    }
    out
}

/// The P_Key blocks of `fabric`: members, non-members, the switch ports of members.
fn pkey_blocks(fabric: &Fabric) -> (Vec<PkeyBlockWrite>, Vec<String>, Vec<(String, u8)>) {
    let mut blocks = Vec::new();
    let mut members = Vec::new();
    let mut enforced = Vec::new();
    for (i, e) in fabric.end_port_ids().enumerate() {
        let ep = fabric.end_port(e);
        let member = i % 2 == 1;
        let mut entries = [0u16; PKEY_BLOCK_SIZE];
        entries[0] = DEFAULT_PKEY;
        if member {
            entries[1] = MEMBER_PKEY;
            members.push(fmt_guid(ep.port_guid));
        }
        blocks.push(PkeyBlockWrite {
            port: PkeyPort::EndPort(ep.port_guid),
            block: 0,
            entries,
        });
    }
    let member_guids: Vec<u64> = fabric
        .end_port_ids()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, e)| fabric.end_port(e).port_guid)
        .collect();
    for sw in fabric.switch_ids() {
        let s = fabric.switch(sw);
        for (pn, p) in s.external_ports() {
            if let Remote::EndPort(e) = p.remote {
                if member_guids.contains(&fabric.end_port(e).port_guid) {
                    let mut entries = [0u16; PKEY_BLOCK_SIZE];
                    entries[0] = DEFAULT_PKEY;
                    entries[1] = MEMBER_PKEY;
                    blocks.push(PkeyBlockWrite {
                        port: PkeyPort::SwitchPort(s.guid, pn),
                        block: 0,
                        entries,
                    });
                    enforced.push((fmt_guid(s.guid), pn));
                }
            }
        }
    }
    (blocks, members, enforced)
}

/// Writes the tables of `seed`, reads every block back through the driver and checks it, and
/// returns what was written as JSON: `mfts` (switch GUID → MLID → port list), `members`,
/// `enforced` (switch GUID, port), `mft_blocks`, `pkey_blocks`, `table_retries`, and the
/// write times `mft_ms`, `pkey_ms` (P_Key: blocks and enforcement bits).
pub async fn write_tables(drv: &UmadDriver, fabric: &Fabric, seed: u64) -> Result<Value> {
    let mfts = mft_blocks(fabric, seed);
    let t = std::time::Instant::now();
    let rep = drv.write_mft_blocks(&mfts).await?;
    let mft_ms = t.elapsed().as_secs_f64() * 1e3;
    ensure!(
        rep.blocks_written == mfts.len(),
        "MFT blocks written {} of {}",
        rep.blocks_written,
        mfts.len()
    );
    let mut shown: BTreeMap<String, BTreeMap<String, Vec<u16>>> = BTreeMap::new();
    for b in &mfts {
        let back = drv.read_mft_block(b.switch, b.block, b.position).await?;
        ensure!(
            back == b.entries,
            "MFT block {} position {} of {} read back differs",
            b.block,
            b.position,
            fmt_guid(b.switch)
        );
        for (i, &mask) in b.entries.iter().enumerate() {
            let mlid = 0xC000 + b.block as usize * MFT_BLOCK_SIZE + i;
            let ports = shown
                .entry(fmt_guid(b.switch))
                .or_default()
                .entry(format!("{mlid:#06x}"))
                .or_default();
            for bit in 0..16u16 {
                if mask & (1 << bit) != 0 {
                    ports.push(u16::from(b.position) * 16 + bit);
                }
            }
        }
    }
    let (pkeys, members, enforced) = pkey_blocks(fabric);
    let t = std::time::Instant::now();
    let prep = drv.write_pkey_blocks(&pkeys).await?;
    let pkey_ms = t.elapsed().as_secs_f64() * 1e3;
    ensure!(
        prep.blocks_written == pkeys.len(),
        "P_Key blocks written {} of {}",
        prep.blocks_written,
        pkeys.len()
    );
    for b in &pkeys {
        let back = drv.read_pkey_block(b.port, b.block).await?;
        ensure!(
            back == b.entries,
            "P_Key block of {:?} read back differs: {back:?}",
            b.port
        );
    }
    Ok(json!({
        "mfts": shown,
        "members": members,
        "enforced": enforced,
        "mft_blocks": rep.blocks_written,
        "pkey_blocks": prep.blocks_written,
        "table_retries": rep.retries + prep.retries,
        "mft_ms": mft_ms,
        "pkey_ms": pkey_ms,
    }))
}
