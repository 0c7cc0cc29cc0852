//! Data VL plans on the oob path, with the real simulator process (issue #19, "program SL-to-VL
//! tables through the oob driver"): the agents report their VLCap (`SwitchInfo.vl_cap`,
//! `--vl-cap`, `--vl-cap-of`), the driver's `data_vl_capacity` is the smallest, and
//! `program_data_vls` writes the plan's table to every agent (read back with `GetSlToVl`) or
//! refuses, before writing anything, naming the switch that cannot hold it.

mod common;

use std::time::Duration;

use common::{upload_all, Sim};
use fabric_oob::proto::{DescribeRequest, GetSlToVlRequest};
use fabric_oob::{OobConfig, OobDriver};
use fabric_southbound::{DataVlPlan, DriverError, SouthboundDriver};
use fabric_topology::{fmt_guid, gen};

const SPEC: &str = "XGFT(2;4,4;1,4)";

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(2);
    c.unreachable_deadline = Duration::from_millis(800);
    c.max_connections = 4;
    c.max_retries = 2;
    c
}

/// Every agent's table, by switch GUID.
async fn tables(sim: &Sim) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for (g, mut c) in sim.agents().await {
        out.push((
            g,
            c.get_sl_to_vl(GetSlToVlRequest {}).await.unwrap().into_inner().vl_of_sl,
        ));
    }
    out
}

/// Discovers, configures LIDs and uploads the LFTs.
async fn bring_up(driver: &OobDriver) -> fabric_topology::Fabric {
    let fabric = driver.discover().await.unwrap();
    let (lids, lfts) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    upload_all(driver, &fabric, &lfts).await;
    fabric
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_plan_reaches_every_agent_and_stays_in_force() {
    let sim = Sim::start(&["--generate", SPEC], "dvl-identity", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    assert_eq!(driver.data_vl_capacity(), None, "unknown before discovery");
    let fabric = bring_up(&driver).await;
    // Default agents: 2 VLs operated (escape VL 1), VLCap 8.
    assert_eq!(driver.caps().escape_vl, Some(1));
    assert_eq!(driver.data_vl_capacity(), Some(8));
    for (g, mut c) in sim.agents().await {
        let d = c.describe(DescribeRequest {}).await.unwrap().into_inner();
        assert_eq!((d.vls, d.vl_cap), (2, 8), "{g:#x}");
    }
    let escape_only = {
        let mut t = vec![0u8; 16];
        t[1] = 1;
        t
    };
    assert!(tables(&sim).await.iter().all(|(_, t)| *t == escape_only));
    let plan = DataVlPlan::identity(4);
    driver.program_data_vls(&plan).await.unwrap();
    let want = plan.sl_to_vl.to_vec();
    let got = tables(&sim).await;
    assert_eq!(got.len(), fabric.num_switches());
    for (g, t) in &got {
        assert_eq!(*t, want, "switch {g:#x}");
        assert_eq!(driver.read_sl_to_vl(*g).await.unwrap().to_vec(), want);
    }
    // A new LID configuration (the next generation) keeps the plan in force.
    let (lids, _) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    let (_, lfts) = common::route(&fabric, 0xFF_FFFF);
    upload_all(&driver, &fabric, &lfts).await;
    assert!(tables(&sim).await.iter().all(|(_, t)| *t == want));
    // Back to the escape-only plan: every agent gets it again.
    driver.program_data_vls(&DataVlPlan::escape_only(1, 1)).await.unwrap();
    assert!(tables(&sim).await.iter().all(|(_, t)| *t == escape_only));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_with_a_small_vlcap_refuses_naming_it() {
    let f = gen::generate_str(SPEC, None).unwrap();
    let small = f.switches()[5].guid;
    let sim = Sim::start(
        &["--generate", SPEC, "--vl-cap-of", &format!("{small:#x}=4")],
        "dvl-small",
        false,
    );
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    bring_up(&driver).await;
    assert_eq!(driver.data_vl_capacity(), Some(4));
    let before = tables(&sim).await;
    let e = driver.program_data_vls(&DataVlPlan::identity(5)).await.unwrap_err();
    match &e {
        DriverError::DataVls { guid, port, reason } => {
            assert_eq!(*guid, small, "{e}");
            assert!(*port > 0, "{e}");
            assert!(reason.contains("needs 5 data VLs, the switch's VLCap is 4"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains(&fmt_guid(small)), "{e}");
    assert_eq!(tables(&sim).await, before, "a refused plan writes nothing");
    // Within the capacity it goes through.
    driver.program_data_vls(&DataVlPlan::identity(4)).await.unwrap();
    assert!(tables(&sim).await.iter().all(|(_, t)| t[..4] == [0, 1, 2, 3]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_sls_stay_off_the_escape_vl_and_old_agents_are_named() {
    // 4 VLs operated: the escape VL is 3, which no data SL may share.
    let sim = Sim::start(&["--generate", SPEC, "--vls", "4"], "dvl-escape", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    bring_up(&driver).await;
    assert_eq!(driver.caps().escape_vl, Some(3));
    let e = driver.program_data_vls(&DataVlPlan::identity(4)).await.unwrap_err();
    assert!(e.to_string().contains("SL 3 maps to VL 3, the escape VL"), "{e}");
    // SLs 0 and 2 on VLs 0 and 2, SL 1 on the escape VL.
    driver.program_data_vls(&DataVlPlan::identity(3)).await.unwrap();
    assert!(tables(&sim).await.iter().all(|(_, t)| t[..4] == [0, 3, 2, 0]));
    drop(sim);

    // Agents without SetSlToVl: the plan is refused naming a switch.
    let sim = Sim::start(&["--generate", SPEC, "--without-sl-to-vl"], "dvl-old", false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let fabric = bring_up(&driver).await;
    match driver.program_data_vls(&DataVlPlan::identity(4)).await.unwrap_err() {
        DriverError::DataVls { guid, reason, .. } => {
            assert!(fabric.switch_by_guid(guid).is_some());
            assert!(reason.contains("does not implement SetSlToVl"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
