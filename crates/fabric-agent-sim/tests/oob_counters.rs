//! Port counters end to end: `fabric-agent-sim` runs as a separate process, the `oob` driver
//! (in process) reads the counters through the agents' `ReadPortCounters`, drills raise them
//! through the control service's `AddPortErrors` (and the `port-errors` command), and killed
//! agents fail only their own ports.

mod common;

use std::time::{Duration, Instant};

use common::{upload_all, Sim};
use fabric_oob::proto::{
    AddPortErrorsRequest, CommandRequest, GetCountersRequest, PortCounterValues, ReadPortCountersRequest,
};
use fabric_oob::{OobConfig, OobDriver};
use fabric_southbound::{CounterPort, CountersReading, DriverError, PortCounters, SouthboundDriver};
use fabric_topology::{fmt_guid, Fabric, Guid};

const SPEC: &str = "XGFT(2;4,4;1,4)";

fn cfg(sim: &Sim) -> OobConfig {
    let mut c = OobConfig::new(&sim.inventory);
    c.connect_timeout = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(2);
    c.unreachable_deadline = Duration::from_millis(800);
    c.max_connections = 8;
    c.max_retries = 2;
    c
}

/// Every external port of every switch.
fn switch_ports(f: &Fabric) -> Vec<CounterPort> {
    f.switches()
        .iter()
        .flat_map(|s| (1..=s.nports).map(move |port| CounterPort::Switch { switch: s.guid, port }))
        .collect()
}

fn switch_of(p: &CounterPort) -> Guid {
    match p {
        CounterPort::Switch { switch, .. } => *switch,
        CounterPort::EndPort(g) => *g,
    }
}

fn ok(r: &CountersReading) -> PortCounters {
    match &r.counters {
        Ok(c) => *c,
        Err(e) => panic!("{}: {e}", r.port),
    }
}

/// A simulator (its own inventory, named after `tag`: tests run in parallel) and a driver
/// that discovered it.
async fn start(tag: &str) -> (Sim, OobDriver, Fabric) {
    let sim = Sim::start(&["--generate", SPEC], tag, false);
    let driver = OobDriver::open(cfg(&sim)).unwrap();
    let fabric = driver.discover().await.unwrap();
    (sim, driver, fabric)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_port_reads_with_one_request_per_agent() {
    let (sim, driver, fabric) = start("counters-all").await;
    let mut ctl = sim.control().await;
    let before = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    let mut ports = switch_ports(&fabric);
    ports.reverse();
    let end_port = fabric.end_ports()[0].port_guid;
    ports.insert(3, CounterPort::EndPort(end_port));
    let r = driver.read_port_counters(&ports).await.unwrap();
    assert_eq!(r.len(), ports.len());
    for (reading, asked) in r.iter().zip(&ports) {
        assert_eq!(reading.port, *asked, "answers come in the order asked");
        match asked {
            CounterPort::EndPort(_) => {
                assert!(
                    matches!(reading.counters, Err(DriverError::Unsupported(_))),
                    "{:?}",
                    reading.counters
                );
            }
            _ => assert_eq!(ok(reading), PortCounters::default()),
        }
    }
    let after = ctl.get_counters(GetCountersRequest {}).await.unwrap().into_inner();
    assert_eq!(
        after.port_counter_reads - before.port_counter_reads,
        fabric.num_switches() as u64,
        "one ReadPortCounters per agent"
    );
    // The agent answers an empty list with every port, and refuses unknown ports per port.
    let (g, mut agent) = sim.agents().await.remove(0);
    let t = agent
        .read_port_counters(ReadPortCountersRequest { ports: vec![] })
        .await
        .unwrap()
        .into_inner();
    let n = fabric.switch(fabric.switch_by_guid(g).unwrap()).nports as usize;
    assert_eq!((t.guid, t.ports.len()), (g, n));
    let t = agent
        .read_port_counters(ReadPortCountersRequest {
            ports: vec![1, 99, 300],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(t.ports[0].error.is_empty() && t.ports[0].counters.is_some());
    for e in &t.ports[1..] {
        assert!(
            e.counters.is_none() && e.error.contains(&format!("port {}", e.port)),
            "{e:?}"
        );
    }
    // Through the driver, a bad port is an error naming the switch and the port.
    let bad = driver
        .read_port_counters(&[CounterPort::Switch { switch: g, port: 99 }])
        .await
        .unwrap();
    let e = bad[0].counters.as_ref().unwrap_err().to_string();
    assert!(e.contains(&format!("{}[99]", fmt_guid(g))), "{e}");
    let unknown = driver
        .read_port_counters(&[CounterPort::Switch { switch: 0x77, port: 1 }])
        .await
        .unwrap();
    assert!(matches!(unknown[0].counters, Err(DriverError::UnknownSwitch(0x77))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_port_errors_raises_exactly_that_port() {
    let (sim, driver, fabric) = start("counters-drill").await;
    let mut ctl = sim.control().await;
    let leaf = fabric.switches().iter().find(|s| s.desc.contains("L0")).unwrap().guid;
    let delta = PortCounterValues {
        symbol_errors: 7,
        link_downed: 300,
        xmit_data: 1_000_000_000_000,
        ..Default::default()
    };
    let reply = ctl
        .add_port_errors(AddPortErrorsRequest {
            switch_guid: leaf,
            port: 5,
            delta: Some(delta),
        })
        .await
        .unwrap()
        .into_inner();
    // LinkDownedCounter is 8 bits wide: it saturates at 255.
    let after = reply.counters.unwrap();
    assert_eq!(
        (after.symbol_errors, after.link_downed, after.xmit_data),
        (7, 255, 1_000_000_000_000)
    );
    // The console grammar adds to another port of the same switch.
    let out = ctl
        .command(CommandRequest {
            line: format!("port-errors {leaf:#x} 6 rcv_errors=3 excessive_buffer_overrun_errors=40"),
        })
        .await
        .unwrap()
        .into_inner()
        .output;
    assert!(
        out.contains("rcv_errors=3") && out.contains("excessive_buffer_overrun_errors=15"),
        "{out}"
    );

    let r = driver.read_port_counters(&switch_ports(&fabric)).await.unwrap();
    for reading in &r {
        let c = ok(reading);
        match reading.port {
            CounterPort::Switch { switch, port: 5 } if switch == leaf => {
                assert_eq!(
                    (c.symbol_errors, c.link_downed, c.xmit_data),
                    (7, 255, 1_000_000_000_000)
                );
                assert_eq!(c.error_total(), 7 + 255);
            }
            CounterPort::Switch { switch, port: 6 } if switch == leaf => {
                assert_eq!(
                    (c.rcv_errors, c.excessive_buffer_overrun_errors, c.error_total()),
                    (3, 15, 18)
                );
            }
            _ => assert_eq!(c, PortCounters::default(), "{}", reading.port),
        }
    }

    // Bad drills are refused naming what is wrong.
    let e = ctl
        .add_port_errors(AddPortErrorsRequest {
            switch_guid: 0x77,
            port: 1,
            delta: Some(delta),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e}");
    for port in [0, 99, 300] {
        let e = ctl
            .add_port_errors(AddPortErrorsRequest {
                switch_guid: leaf,
                port,
                delta: Some(delta),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
        assert!(e.message().contains(&port.to_string()), "{e}");
    }
    assert!(ctl
        .command(CommandRequest {
            line: format!("port-errors {leaf:#x} 1 bogus=1"),
        })
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_agent_fails_only_its_own_ports_and_its_counters_survive() {
    let (sim, driver, fabric) = start("counters-kill").await;
    let mut ctl = sim.control().await;
    let spine = fabric.switches().iter().find(|s| s.desc.contains("L1")).unwrap().guid;
    let bump = PortCounterValues {
        rcv_errors: 4,
        ..Default::default()
    };
    ctl.add_port_errors(AddPortErrorsRequest {
        switch_guid: spine,
        port: 2,
        delta: Some(bump),
    })
    .await
    .unwrap();
    ctl.command(CommandRequest {
        line: format!("kill {spine:#x}"),
    })
    .await
    .unwrap();
    // Counting goes on in the switch while its agent is gone.
    ctl.add_port_errors(AddPortErrorsRequest {
        switch_guid: spine,
        port: 2,
        delta: Some(bump),
    })
    .await
    .unwrap();
    let ports = switch_ports(&fabric);
    // Right after the kill (the driver still has a connection) and after the monitor's deadline.
    for wait in [Duration::ZERO, Duration::from_millis(1200)] {
        tokio::time::sleep(wait).await;
        let t = Instant::now();
        let r = driver.read_port_counters(&ports).await.unwrap();
        let took = t.elapsed();
        assert!(took < Duration::from_secs(2), "a dead agent held the read for {took:?}");
        for reading in &r {
            if switch_of(&reading.port) == spine {
                let e = reading.counters.as_ref().expect_err("killed agent answered");
                assert!(e.to_string().contains(&fmt_guid(spine)), "{e}");
            } else {
                assert_eq!(ok(reading), PortCounters::default(), "{}", reading.port);
            }
        }
    }
    // The agent restarts: the switch's counters were kept (an agent restart is no reboot).
    ctl.command(CommandRequest {
        line: format!("restore {spine:#x}"),
    })
    .await
    .unwrap();
    let port = CounterPort::Switch { switch: spine, port: 2 };
    let deadline = Instant::now() + Duration::from_secs(10);
    let c = loop {
        let r = driver.read_port_counters(&[port]).await.unwrap();
        match &r[0].counters {
            Ok(c) => break *c,
            Err(e) if Instant::now() > deadline => panic!("restored agent still fails: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    assert_eq!(c.rcv_errors, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_reads_have_their_own_small_limit_and_do_not_delay_uploads() {
    let sim = Sim::start(&["--generate", SPEC], "counters-limit", false);
    let mut c = cfg(&sim);
    c.max_counter_reads = 1;
    let driver = OobDriver::open(c).unwrap();
    let fabric = driver.discover().await.unwrap();
    let (lids, lfts) = common::route(&fabric, 0xFF_FFFF);
    driver.configure_lids(&fabric, &lids).await.unwrap();
    upload_all(&driver, &fabric, &lfts).await;
    let mut ctl = sim.control().await;
    const DELAY_MS: u64 = 200;
    ctl.command(CommandRequest {
        line: format!("delay all {DELAY_MS}"),
    })
    .await
    .unwrap();
    let ports = switch_ports(&fabric);
    let n = fabric.num_switches() as u32;
    let t = Instant::now();
    let (counters, upload) = tokio::join!(
        async {
            let r = driver.read_port_counters(&ports).await.unwrap();
            (r, t.elapsed())
        },
        async {
            // Starts once the counter read holds its one permit.
            tokio::time::sleep(Duration::from_millis(20)).await;
            upload_all(&driver, &fabric, &lfts).await;
            t.elapsed()
        }
    );
    let (r, read_took) = counters;
    eprintln!("{n} agents, {DELAY_MS} ms each: counter reads {read_took:?}, concurrent upload {upload:?}");
    assert!(r.iter().all(|r| r.counters.is_ok()));
    // One read at a time: at least one delayed reply per switch, one after the other.
    assert!(
        read_took >= Duration::from_millis(DELAY_MS) * n,
        "{n} agents read in {read_took:?}: more than one at a time"
    );
    // The upload (8 permits of its own) did not queue behind the reads.
    assert!(
        upload < read_took / 2,
        "upload took {upload:?} while the counter reads took {read_took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_protect_level_2_counter_reads_need_the_key() {
    let sim = Sim::start(&["--generate", SPEC], "counters-key", false);
    let mut c = cfg(&sim);
    c.management_key = 0x5eed_0000_0000_0001;
    c.management_key_protect = 2;
    let driver = OobDriver::open(c).unwrap();
    let fabric = driver.discover().await.unwrap();
    let ports = switch_ports(&fabric);
    // The driver that set the key reads every port (the key goes in the read metadata).
    let r = driver.read_port_counters(&ports).await.unwrap();
    assert!(r.iter().all(|r| r.counters.is_ok()));
    // A manager without the key is refused on every port, naming the switch.
    let other = OobDriver::open(cfg(&sim)).unwrap();
    let r = other.read_port_counters(&ports).await.unwrap();
    for reading in &r {
        let e = reading.counters.as_ref().expect_err("read without the key").to_string();
        assert!(e.contains(&fmt_guid(switch_of(&reading.port))), "{e}");
    }
    // So is a bare agent client.
    let (_, mut agent) = sim.agents().await.remove(0);
    let e = agent
        .read_port_counters(ReadPortCountersRequest { ports: vec![1] })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
}
