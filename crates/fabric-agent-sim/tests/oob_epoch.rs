//! Write fencing end-to-end, with `fabric-agent-sim` as a separate process and `oob` drivers in
//! process: two managers (two drivers with their own [`Fence`]) on one simulator; the newer
//! epoch's discovery fences every agent, the older manager's next write is refused by every
//! agent (counted, nothing applied) and closes its fence; a fenced manager sends no write at
//! all; malformed epoch metadata and the order of the key and epoch checks.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{blocks, upload_all, Sim};
use fabric_oob::proto::sim_control_client::SimControlClient;
use fabric_oob::proto::switch_agent_client::SwitchAgentClient;
use fabric_oob::proto::{
    CommandRequest, DescribeRequest, GetCountersRequest, GetEpochStatsRequest, ReadLftBlockRequest,
    SetManagementKeyRequest, SetPortStateRequest, SwitchEpochStats, VerifyAllPairsRequest, WatchPortsRequest,
};
use fabric_oob::{OobConfig, OobDriver, MANAGER_EPOCH_METADATA};
use fabric_southbound::{DriverError, Fence, FenceState, SouthboundDriver};
use fabric_topology::{fmt_guid, Guid};
use tonic::transport::Channel;
use tonic::Code;

const SPEC: &str = "XGFT(2;4,4;1,4)";

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(5);
    c.unreachable_deadline = Duration::from_secs(2);
    // One request per switch in flight at once (8 switches): every switch's write is sent
    // before the first refusal comes back.
    c.max_connections = 64;
    c.max_retries = 2;
    c
}

/// A leader's fence at `epoch` (lease valid for a minute).
fn leader(epoch: u64) -> Arc<Fence> {
    let f = Arc::new(Fence::standby());
    f.grant(epoch, Instant::now() + Duration::from_secs(60));
    f
}

async fn epoch_stats(ctl: &mut SimControlClient<Channel>) -> BTreeMap<Guid, SwitchEpochStats> {
    let s = ctl.get_epoch_stats(GetEpochStatsRequest {}).await.unwrap().into_inner();
    s.switches.into_iter().map(|s| (s.guid, s)).collect()
}

async fn command(ctl: &mut SimControlClient<Channel>, line: &str) -> String {
    ctl.command(CommandRequest { line: line.into() })
        .await
        .unwrap()
        .into_inner()
        .output
}

async fn all_pairs_ok(ctl: &mut SimControlClient<Channel>) {
    let r = ctl
        .verify_all_pairs(VerifyAllPairsRequest { use_escape: false })
        .await
        .unwrap()
        .into_inner();
    assert!(r.pairs_checked > 0);
    assert_eq!(r.unreachable_count, 0, "{:?}", r.unreachable.first());
}

fn is_fenced(e: &DriverError) -> bool {
    matches!(e, DriverError::Fenced { .. })
}

#[tokio::test(flavor = "current_thread")]
async fn the_newer_epoch_fences_every_agent_and_the_older_manager_stops() {
    let sim = Sim::start(&["--generate", SPEC], "epoch-two", false);
    let mut ctl = sim.control().await;

    // Manager A, epoch 5: discovers, configures, uploads.
    let fence5 = leader(5);
    let a = OobDriver::open(cfg(&sim)).unwrap();
    a.set_fence(fence5.clone());
    assert_eq!(a.fence().unwrap().epoch(), 5);
    let f = a.discover().await.unwrap();
    let n = f.num_switches();
    let (lids, lfts) = common::route(&f, 0xFF_FFFF);
    a.configure_lids(&f, &lids).await.unwrap();
    assert_eq!(upload_all(&a, &f, &lfts).await, n * lfts.num_blocks());
    all_pairs_ok(&mut ctl).await;
    let st = epoch_stats(&mut ctl).await;
    assert_eq!(st.len(), n);
    for s in st.values() {
        assert_eq!(s.manager_epoch, 5, "{s:?}");
        // SetAddresses, SetSlToVl and at least one WriteLftBlocks.
        assert!(s.accepted_writes >= 3, "{s:?}");
        assert_eq!(s.refused_writes, 0, "{s:?}");
    }

    // Manager B, epoch 7: its discovery alone (reads) fences every agent.
    let fence7 = leader(7);
    let b = OobDriver::open(cfg(&sim)).unwrap();
    b.set_fence(fence7.clone());
    let f2 = b.discover().await.unwrap();
    let before = epoch_stats(&mut ctl).await;
    for s in before.values() {
        assert_eq!(s.manager_epoch, 7, "{s:?}");
        assert_eq!(
            s.accepted_writes, st[&s.guid].accepted_writes,
            "B wrote nothing yet: {s:?}"
        );
    }
    for (g, mut c) in sim.agents().await {
        let info = c.describe(DescribeRequest {}).await.unwrap().into_inner();
        assert_eq!(info.manager_epoch, 7, "{}", fmt_guid(g));
    }

    // A's next write: every switch's request is sent (the fence is open when they leave), so
    // every agent refuses one; nothing is applied, and A's fence is closed. The agents answer
    // 200 ms late so that no refusal comes back before the last request left.
    command(&mut ctl, "delay all 200").await;
    let mut stale = blocks(&f, &lfts);
    for w in &mut stale {
        w.entries = [255; 64];
    }
    let e = a.write_lft_blocks(&stale).await.unwrap_err();
    command(&mut ctl, "delay all 0").await;
    assert!(is_fenced(&e), "{e}");
    assert!(e.to_string().contains("epoch 7"), "{e}");
    assert_eq!(fence5.superseded_by(), Some(7));
    assert_eq!(fence5.state(), FenceState::Lost { epoch: 5, by: 7 });
    let after = epoch_stats(&mut ctl).await;
    for s in after.values() {
        let was = &before[&s.guid];
        assert_eq!(s.refused_writes, 1, "{} {s:?}", fmt_guid(s.guid));
        assert_eq!(s.last_refused_epoch, 5, "{s:?}");
        assert_eq!(s.accepted_writes, was.accepted_writes, "{s:?}");
        assert_eq!(s.manager_epoch, 7, "{s:?}");
    }
    // Tables unchanged (read by A: reads of an older epoch are answered), every pair reachable.
    for sid in f.switch_ids() {
        for blk in 0..lfts.num_blocks() {
            let got = a.read_lft_block(f.switch(sid).guid, blk as u32).await.unwrap();
            assert_eq!(
                &got[..],
                lfts.block(sid, blk),
                "{} block {blk}",
                fmt_guid(f.switch(sid).guid)
            );
        }
    }
    all_pairs_ok(&mut ctl).await;

    // A is fenced now: its writes are refused locally and reach no agent.
    let refused_locally = fence5.refused();
    let leaf = f.switches()[0].guid;
    assert!(is_fenced(&a.set_port_state(leaf, 1, false).await.unwrap_err()));
    assert!(is_fenced(&a.write_lft_blocks(&stale).await.unwrap_err()));
    assert!(is_fenced(&a.configure_lids(&f, &lids).await.unwrap_err()));
    assert_eq!(fence5.refused(), refused_locally + 3);
    assert_eq!(epoch_stats(&mut ctl).await, after);

    // B writes fine.
    b.configure_lids(&f2, &lids).await.unwrap();
    assert_eq!(upload_all(&b, &f2, &lfts).await, n * lfts.num_blocks());
    all_pairs_ok(&mut ctl).await;
    for s in epoch_stats(&mut ctl).await.values() {
        assert!(s.accepted_writes > after[&s.guid].accepted_writes, "{s:?}");
        assert_eq!((s.refused_writes, s.manager_epoch), (1, 7), "{s:?}");
    }
    assert_eq!(fence7.superseded_by(), None);
    assert_eq!(fence7.refused(), 0);

    // A manager without a fence (no [ha]) is refused too, and told why.
    let c = OobDriver::open(cfg(&sim)).unwrap();
    c.discover().await.unwrap();
    let e = c.set_port_state(leaf, 1, false).await.unwrap_err();
    assert!(is_fenced(&e) && e.to_string().contains("no [ha]"), "{e}");
    assert_eq!(epoch_stats(&mut ctl).await[&leaf].last_refused_epoch, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_manager_sends_no_write() {
    let sim = Sim::start(&["--generate", SPEC], "epoch-local", false);
    let mut ctl = sim.control().await;
    let mut c = cfg(&sim);
    // A configured key is not installed at discovery by a fenced manager either.
    c.management_key = 0x1234_5678;
    let d = OobDriver::open(c).unwrap();
    let fence = Arc::new(Fence::standby());
    d.set_fence(fence.clone());
    // Reads work: a standby discovers (epoch 0).
    let f = d.discover().await.unwrap();
    assert!(d.discovery_warnings().is_empty(), "{:?}", d.discovery_warnings());
    let (lids, lfts) = common::route(&f, 0xFF_FFFF);
    let leaf = f.switches()[0].guid;
    let all_writes = |d: OobDriver| {
        let (f, lids, w) = (f.clone(), lids.clone(), blocks(&f, &lfts));
        async move {
            vec![
                d.configure_lids(&f, &lids).await.unwrap_err(),
                d.write_lft_blocks(&w).await.unwrap_err(),
                d.set_port_state(leaf, 1, false).await.unwrap_err(),
                d.set_switch_state(leaf, false).await.unwrap_err(),
            ]
        }
    };
    for e in all_writes(d.clone()).await {
        assert!(is_fenced(&e) && e.to_string().contains("standby"), "{e}");
    }
    assert_eq!(fence.refused(), 4);

    // Expired: elected at epoch 3, the lease not renewed in time.
    fence.grant(3, Instant::now());
    for e in all_writes(d.clone()).await {
        assert!(is_fenced(&e) && e.to_string().contains("not renewed"), "{e}");
    }
    assert_eq!(fence.refused(), 8);

    // No write reached an agent: none counted, accepted or refused, no key set. (An agent may
    // have seen epoch 3 on a read: the driver's port monitor connects to each agent in the
    // background, and one that connects only after the grant carries the elected epoch, as
    // every read does — seen on a loaded machine.)
    for s in epoch_stats(&mut ctl).await.values() {
        assert_eq!((s.accepted_writes, s.refused_writes), (0, 0), "{s:?}");
        assert!(matches!(s.manager_epoch, 0 | 3), "{s:?}");
    }
    let counters = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(counters.lft_write_calls, 0);
    for (g, mut c) in sim.agents().await {
        let info = c.describe(DescribeRequest {}).await.unwrap().into_inner();
        assert!(!info.management_key_set, "{}", fmt_guid(g));
    }

    // Renewed: the same driver writes (key first), with epoch 3.
    fence.renew(Instant::now(), Duration::from_secs(60));
    d.configure_lids(&f, &lids).await.unwrap();
    assert_eq!(upload_all(&d, &f, &lfts).await, f.num_switches() * lfts.num_blocks());
    all_pairs_ok(&mut ctl).await;
    for s in epoch_stats(&mut ctl).await.values() {
        assert_eq!(s.manager_epoch, 3, "{s:?}");
        // SetManagementKey, SetAddresses, SetSlToVl, WriteLftBlocks.
        assert!(s.accepted_writes >= 4, "{s:?}");
    }
}

async fn write_with(c: &mut SwitchAgentClient<Channel>, epoch: Option<&str>, key: u64) -> Result<(), tonic::Status> {
    let mut r = tonic::Request::new(SetPortStateRequest {
        port: 1,
        up: true,
        management_key: key,
    });
    if let Some(e) = epoch {
        r.metadata_mut().insert(MANAGER_EPOCH_METADATA, e.parse().unwrap());
    }
    c.set_port_state(r).await.map(|_| ())
}

async fn describe_with(c: &mut SwitchAgentClient<Channel>, epoch: &str) -> Result<u64, tonic::Status> {
    let mut r = tonic::Request::new(DescribeRequest {});
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, epoch.parse().unwrap());
    c.describe(r).await.map(|r| r.into_inner().manager_epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_protocol_raw_epoch_metadata_and_the_key_first() {
    let sim = Sim::start(&["--generate", SPEC], "epoch-raw", false);
    let mut ctl = sim.control().await;
    let mut agents = sim.agents().await;
    let (g, c) = &mut agents[0];
    let g = *g;

    // Malformed: INVALID_ARGUMENT naming the entry and the switch; nothing raised.
    for bad in ["abc", "-1", "+5", "1.5", "18446744073709551616", ""] {
        let e = describe_with(c, bad).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}: {e:?}");
        assert!(
            e.message().contains(MANAGER_EPOCH_METADATA) && e.message().contains(&fmt_guid(g)),
            "{}",
            e.message()
        );
        let e = write_with(c, Some(bad), 0).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}: {e:?}");
    }
    assert_eq!(epoch_stats(&mut ctl).await[&g].manager_epoch, 0);

    // Missing = epoch 0, accepted while nothing higher was seen; a read raises the epoch.
    write_with(c, None, 0).await.unwrap();
    let mut r = tonic::Request::new(ReadLftBlockRequest { block: 0 });
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "9".parse().unwrap());
    c.read_lft_block(r).await.unwrap();
    assert_eq!(describe_with(c, "4").await.unwrap(), 9, "a lower epoch never lowers it");

    // A stale write: FAILED_PRECONDITION, the message, the epoch in the response metadata.
    for stale in [None, Some("8")] {
        let e = write_with(c, stale, 0).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        let n = stale.unwrap_or("0");
        assert!(
            e.message()
                .starts_with(&format!("stale manager epoch {n}: this switch follows epoch 9")),
            "{}",
            e.message()
        );
        assert_eq!(e.metadata().get(MANAGER_EPOCH_METADATA).unwrap().to_str().unwrap(), "9");
    }
    write_with(c, Some("9"), 0).await.unwrap();
    let s = &epoch_stats(&mut ctl).await[&g];
    assert_eq!(
        (
            s.manager_epoch,
            s.accepted_writes,
            s.refused_writes,
            s.last_refused_epoch
        ),
        (9, 2, 2, 8)
    );

    // The key is checked first: a write without it is PERMISSION_DENIED whatever its epoch,
    // and does not raise the epoch; with it, a stale epoch is refused.
    let key = 0xfeed;
    let mut r = tonic::Request::new(SetManagementKeyRequest {
        key,
        protect: 1,
        management_key: 0,
    });
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "9".parse().unwrap());
    c.set_management_key(r).await.unwrap();
    let e = write_with(c, Some("100"), 0).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = write_with(c, Some("5"), key).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    write_with(c, Some("10"), key).await.unwrap();
    let s = &epoch_stats(&mut ctl).await[&g];
    assert_eq!(
        (
            s.manager_epoch,
            s.accepted_writes,
            s.refused_writes,
            s.last_refused_epoch
        ),
        (10, 4, 3, 5)
    );

    // The epoch survives kill/restore of the agent; `epoch-forget` drops it (counts kept).
    command(&mut ctl, "kill all").await;
    command(&mut ctl, "restore all").await;
    let mut agents = sim.agents().await;
    let (_, c) = agents.iter_mut().find(|(x, _)| *x == g).unwrap();
    assert_eq!(describe_with(c, "1").await.unwrap(), 10);
    assert!(command(&mut ctl, "epochs")
        .await
        .contains(&format!("{} epoch 10", fmt_guid(g))));
    command(&mut ctl, &format!("epoch-forget {}", fmt_guid(g))).await;
    assert_eq!(describe_with(c, "1").await.unwrap(), 1);
    assert_eq!(epoch_stats(&mut ctl).await[&g].refused_writes, 3);

    // Opening a port event stream raises it too.
    let mut r = tonic::Request::new(WatchPortsRequest {});
    r.metadata_mut().insert(MANAGER_EPOCH_METADATA, "12".parse().unwrap());
    let mut events = c.watch_ports(r).await.unwrap().into_inner();
    assert!(events.message().await.unwrap().unwrap().snapshot);
    assert_eq!(epoch_stats(&mut ctl).await[&g].manager_epoch, 12);
}
