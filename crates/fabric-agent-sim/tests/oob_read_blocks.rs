//! `ReadLftBlocks` (many LFT blocks in one call, the takeover's read-back), with
//! `fabric-agent-sim` as a separate process: the blocks equal the per-block reads, the limit per
//! call, blocks past the table, the key (protect level 2) and epoch rules of the other reads,
//! the driver's chunking, and its fallback to `ReadLftBlock` on an agent that answers
//! UNIMPLEMENTED.

mod common;

use std::time::Duration;

use common::{upload_all, Sim};
use fabric_oob::proto::switch_agent_client::SwitchAgentClient;
use fabric_oob::proto::{
    DescribeRequest, GetCountersRequest, ReadLftBlockRequest, ReadLftBlocksRequest, SetManagementKeyRequest,
};
use fabric_oob::{OobConfig, OobDriver, MANAGER_EPOCH_METADATA, MAX_READ_LFT_BLOCKS, READ_KEY_METADATA};
use fabric_southbound::SouthboundDriver;
use fabric_topology::fmt_guid;
use tonic::transport::Channel;
use tonic::Code;

const SPEC: &str = "XGFT(2;4,4;1,4)";

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(5);
    c.unreachable_deadline = Duration::from_secs(2);
    c.max_connections = 8;
    c.max_retries = 2;
    c
}

fn blocks_req(first: u32, count: u32) -> ReadLftBlocksRequest {
    ReadLftBlocksRequest { first, count }
}

async fn read_one(c: &mut SwitchAgentClient<Channel>, block: u32) -> Result<Vec<u8>, tonic::Status> {
    c.read_lft_block(ReadLftBlockRequest { block })
        .await
        .map(|r| r.into_inner().entries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_lft_blocks_equal_per_block_reads_within_the_limit() {
    let sim = Sim::start(&["--generate", SPEC], "readblocks", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let f = driver.discover().await.unwrap();
    let (lids, lfts) = common::route(&f, 0xFF_FFFF);
    driver.configure_lids(&f, &lids).await.unwrap();
    upload_all(&driver, &f, &lfts).await;
    let nb = lfts.num_blocks() as u32;
    let mut ctl = sim.control().await;
    let before = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();

    // Through the driver: one call per switch, the routed blocks, equal to per-block reads;
    // blocks never written (past the routing) read as all 255 like ReadLftBlock.
    for s in f.switch_ids() {
        let g = f.switch(s).guid;
        let got = driver.read_lft_blocks(g, 0, nb + 3).await.unwrap();
        assert_eq!(got.len(), nb as usize + 3);
        for (b, e) in got.iter().enumerate() {
            assert_eq!(
                &e[..],
                &driver.read_lft_block(g, b as u32).await.unwrap()[..],
                "{} block {b}",
                fmt_guid(g)
            );
            if b < nb as usize {
                assert_eq!(&e[..], lfts.block(s, b), "{} block {b}", fmt_guid(g));
            } else {
                assert!(e.iter().all(|&p| p == 255), "{} block {b}: {e:?}", fmt_guid(g));
            }
        }
    }
    let after = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    let n = f.num_switches() as u64;
    assert_eq!(
        after.lft_multi_reads - before.lft_multi_reads,
        n,
        "one ReadLftBlocks per switch"
    );
    assert_eq!(
        after.lft_multi_blocks_read - before.lft_multi_blocks_read,
        n * u64::from(nb + 3)
    );

    // The driver splits a longer read into calls of at most MAX_READ_LFT_BLOCKS.
    let g = f.switches()[0].guid;
    let long = 2 * MAX_READ_LFT_BLOCKS + 5;
    let got = driver.read_lft_blocks(g, 0, long).await.unwrap();
    assert_eq!(got.len(), long as usize);
    let s0 = f.switch_ids().next().unwrap();
    for (b, e) in got.iter().enumerate().take(nb as usize) {
        assert_eq!(&e[..], lfts.block(s0, b));
    }
    let chunked = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(chunked.lft_multi_reads - after.lft_multi_reads, 3);

    // The agent protocol: the limit, named; zero blocks; blocks past the table fail as
    // ReadLftBlock fails for them.
    let mut agents = sim.agents().await;
    let (g, c) = &mut agents[0];
    let e = c
        .read_lft_blocks(blocks_req(0, MAX_READ_LFT_BLOCKS + 1))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(
        e.message().contains(&MAX_READ_LFT_BLOCKS.to_string()) && e.message().contains(&fmt_guid(*g)),
        "{}",
        e.message()
    );
    let e = c.read_lft_blocks(blocks_req(0, 0)).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let full = c
        .read_lft_blocks(blocks_req(1, MAX_READ_LFT_BLOCKS))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(full.blocks.len(), MAX_READ_LFT_BLOCKS as usize);
    for (i, b) in full.blocks.iter().enumerate().take(nb as usize + 2) {
        assert_eq!(b.block, 1 + i as u32);
        assert_eq!(b.entries, read_one(c, b.block).await.unwrap(), "block {}", b.block);
    }
    let top = c.describe(DescribeRequest {}).await.unwrap().into_inner().lft_blocks;
    let single = read_one(c, top).await.unwrap_err();
    let e = c.read_lft_blocks(blocks_req(top - 2, 4)).await.unwrap_err();
    assert_eq!(e.code(), single.code(), "{e:?} vs {single:?}");
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    let last = c.read_lft_blocks(blocks_req(top - 2, 2)).await.unwrap().into_inner();
    assert_eq!(last.blocks.len(), 2);
    let e = c.read_lft_blocks(blocks_req(u32::MAX, 2)).await.unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");

    // A read raises the agent's epoch, a lower one never lowers it; malformed metadata is refused.
    let mut r = tonic::Request::new(blocks_req(0, 2));
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "11".parse().unwrap());
    c.read_lft_blocks(r).await.unwrap();
    let mut r = tonic::Request::new(blocks_req(0, 2));
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "3".parse().unwrap());
    c.read_lft_blocks(r)
        .await
        .expect("reads from an older epoch are answered");
    let d = c.describe(DescribeRequest {}).await.unwrap().into_inner();
    assert_eq!(d.manager_epoch, 11);
    let mut r = tonic::Request::new(blocks_req(0, 2));
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "x1".parse().unwrap());
    let e = c.read_lft_blocks(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

    // Protect level 2: the key is needed to read, as for ReadLftBlock.
    let key = 0x5eed_0000_0000_0042u64;
    // (The write carries the epoch the agent follows now.)
    let mut r = tonic::Request::new(SetManagementKeyRequest {
        key,
        protect: 2,
        management_key: 0,
    });
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "11".parse().unwrap());
    c.set_management_key(r).await.unwrap();
    let e = c.read_lft_blocks(blocks_req(0, 2)).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(read_one(c, 0).await.unwrap_err().code(), Code::PermissionDenied);
    let mut r = tonic::Request::new(blocks_req(0, 2));
    r.metadata_mut()
        .insert(READ_KEY_METADATA, format!("{:016x}", key ^ 1).parse().unwrap());
    assert_eq!(c.read_lft_blocks(r).await.unwrap_err().code(), Code::PermissionDenied);
    let mut r = tonic::Request::new(blocks_req(0, nb));
    r.metadata_mut()
        .insert(READ_KEY_METADATA, format!("{key:016x}").parse().unwrap());
    let keyed = c.read_lft_blocks(r).await.unwrap().into_inner();
    let s = f.switch_ids().find(|&s| f.switch(s).guid == *g).unwrap();
    for (b, blk) in keyed.blocks.iter().enumerate() {
        assert_eq!(blk.entries, lfts.block(s, b));
    }
}

/// An agent that predates `ReadLftBlocks` answers UNIMPLEMENTED: the driver reads block by block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_falls_back_to_per_block_reads_on_older_agents() {
    let sim = Sim::start(
        &["--generate", SPEC, "--without-read-lft-blocks"],
        "readblocks-old",
        false,
    );
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let f = driver.discover().await.unwrap();
    let (lids, lfts) = common::route(&f, 0xFF_FFFF);
    driver.configure_lids(&f, &lids).await.unwrap();
    upload_all(&driver, &f, &lfts).await;
    let nb = lfts.num_blocks() as u32;
    let mut agents = sim.agents().await;
    let e = agents[0].1.read_lft_blocks(blocks_req(0, 1)).await.unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e:?}");

    let mut ctl = sim.control().await;
    let before = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    for s in f.switch_ids() {
        let got = driver.read_lft_blocks(f.switch(s).guid, 0, nb).await.unwrap();
        assert_eq!(got.len(), nb as usize);
        for (b, e) in got.iter().enumerate() {
            assert_eq!(&e[..], lfts.block(s, b));
        }
    }
    let after = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(after.lft_multi_reads, 0);
    assert_eq!(
        after.lft_block_reads - before.lft_block_reads,
        f.num_switches() as u64 * u64::from(nb)
    );
}
