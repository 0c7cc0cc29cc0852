//! Tests of the port counters on the two-level fabric of `tests` (leaves 0x10/0x11 with end
//! ports on ports 1-2 and spines on 3-4; spines 0x20/0x21).

use std::time::Duration;

use fabric_southbound::{Counter, CounterPort, PacketSimulator, PortCounters, SouthboundDriver, TraceError};
use proptest::prelude::{prop_assert_eq, proptest, ProptestConfig};

use super::tests::{two_level, L0, L1, N0, N1, S0, S1};
use super::*;

fn sw(switch: Guid, port: PortNum) -> CounterPort {
    CounterPort::Switch { switch, port }
}

fn every_port(m: &MockFabric) -> Vec<CounterPort> {
    let mut v: Vec<CounterPort> = m
        .cabling()
        .switches()
        .iter()
        .flat_map(|s| (1..=s.nports).map(move |p| sw(s.guid, p)))
        .collect();
    v.extend(
        m.cabling()
            .end_ports()
            .iter()
            .map(|e| CounterPort::EndPort(e.port_guid)),
    );
    v
}

async fn read_ok(m: &MockFabric, p: CounterPort) -> PortCounters {
    let r = m.read_port_counters(&[p]).await.unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].port, p);
    *r[0].counters.as_ref().unwrap()
}

#[tokio::test]
async fn a_fresh_fabric_reads_zero_everywhere_in_the_order_asked() {
    let m = MockFabric::new(two_level());
    let mut ports = every_port(&m);
    ports.reverse();
    let r = m.read_port_counters(&ports).await.unwrap();
    assert_eq!(r.len(), ports.len());
    for (reading, asked) in r.iter().zip(&ports) {
        assert_eq!(reading.port, *asked);
        assert_eq!(*reading.counters.as_ref().unwrap(), PortCounters::default(), "{asked}");
    }
}

#[tokio::test]
async fn a_drill_raises_exactly_that_port() {
    let m = MockFabric::new(two_level());
    let delta = PortCounters {
        symbol_errors: 7,
        rcv_errors: 2,
        xmit_data: 1000,
        ..Default::default()
    };
    m.add_port_errors(sw(L0, 3), &delta).unwrap();
    m.add_port_errors(CounterPort::EndPort(N1), &delta).unwrap();
    m.add_port_errors(sw(L0, 3), &delta).unwrap();
    let r = m.read_port_counters(&every_port(&m)).await.unwrap();
    for reading in r {
        let c = reading.counters.unwrap();
        if reading.port == sw(L0, 3) {
            assert_eq!((c.symbol_errors, c.rcv_errors, c.xmit_data), (14, 4, 2000));
            assert_eq!(c.error_total(), 18);
        } else if reading.port == CounterPort::EndPort(N1) {
            assert_eq!(c, delta);
        } else {
            // The spine port on the other end of the cable does not see L0's receive errors.
            assert_eq!(c, PortCounters::default(), "{}", reading.port);
        }
    }
}

#[tokio::test]
async fn bad_ports_are_named_per_port_and_do_not_fail_the_batch() {
    let m = MockFabric::new(two_level());
    let ports = [sw(L0, 7), sw(L0, 0), sw(0x99, 1), CounterPort::EndPort(0x98), sw(L1, 6)];
    let r = m.read_port_counters(&ports).await.unwrap();
    assert!(matches!(
        r[0].counters,
        Err(DriverError::InvalidPort { guid: L0, port: 7, .. })
    ));
    assert!(matches!(
        r[1].counters,
        Err(DriverError::InvalidPort { guid: L0, port: 0, .. })
    ));
    assert!(matches!(r[2].counters, Err(DriverError::UnknownSwitch(0x99))));
    assert!(matches!(r[3].counters, Err(DriverError::UnknownEndPort(0x98))));
    // An uncabled port exists and reads (zero).
    assert_eq!(*r[4].counters.as_ref().unwrap(), PortCounters::default());
    let e = m.add_port_errors(sw(L0, 9), &PortCounters::default()).unwrap_err();
    assert!(matches!(e, TraceError::NoCounterPort(_)));
    let text = e.to_string();
    assert!(
        text.contains("0x0000000000000010[9]") && text.contains("no such external port"),
        "{text}"
    );
}

#[tokio::test]
async fn unreachable_and_powered_off_switches_answer_per_port() {
    let m = MockFabric::new(two_level());
    m.add_port_errors(
        sw(S0, 1),
        &PortCounters {
            symbol_errors: 3,
            ..Default::default()
        },
    )
    .unwrap();
    m.set_switch_state(S0, false).await.unwrap();
    let mut cfg = m.config();
    cfg.unreachable_switches = vec![S1];
    m.set_config(cfg).unwrap();
    m.set_end_port_state(N0, false).await.unwrap();
    let r = m
        .read_port_counters(&[sw(S0, 1), sw(S1, 1), sw(L0, 3), CounterPort::EndPort(N0)])
        .await
        .unwrap();
    assert!(matches!(r[0].counters, Err(DriverError::Unreachable { guid: S0 })));
    assert!(matches!(r[1].counters, Err(DriverError::Unreachable { guid: S1 })));
    assert!(r[2].counters.is_ok());
    assert!(matches!(r[3].counters, Err(DriverError::Unreachable { guid: N0 })));
    // Powered back on without a reset: the counters are kept.
    m.set_switch_state(S0, true).await.unwrap();
    assert_eq!(read_ok(&m, sw(S0, 1)).await.symbol_errors, 3);
}

#[tokio::test]
async fn a_reboot_resets_the_switch_counters_when_configured() {
    let m = MockFabric::new(two_level())
        .with_config(MockConfig {
            reset_on_power_cycle: true,
            ..MockConfig::default()
        })
        .unwrap();
    m.add_port_errors(
        sw(S0, 1),
        &PortCounters {
            rcv_errors: 5,
            ..Default::default()
        },
    )
    .unwrap();
    m.add_port_errors(
        sw(L0, 3),
        &PortCounters {
            rcv_errors: 5,
            ..Default::default()
        },
    )
    .unwrap();
    m.set_switch_state(S0, false).await.unwrap();
    m.set_switch_state(S0, true).await.unwrap();
    assert_eq!(read_ok(&m, sw(S0, 1)).await, PortCounters::default());
    // The leaf kept its errors and counted the loss of its link to the spine.
    let l = read_ok(&m, sw(L0, 3)).await;
    assert_eq!((l.rcv_errors, l.link_downed), (5, 1));
}

#[tokio::test]
async fn link_losses_count_in_link_downed_on_the_surviving_ends() {
    let m = MockFabric::new(two_level());
    // A cable taken down: both ends; taking it down again (already down) counts nothing.
    m.set_port_state(L0, 3, false).await.unwrap();
    m.set_port_state(L0, 3, false).await.unwrap();
    m.set_port_state(L0, 3, true).await.unwrap();
    assert_eq!(read_ok(&m, sw(L0, 3)).await.link_downed, 1);
    assert_eq!(read_ok(&m, sw(S0, 1)).await.link_downed, 1);
    // A leaf port facing an end port: the switch port and the end port.
    m.set_port_state(L0, 1, false).await.unwrap();
    assert_eq!(read_ok(&m, sw(L0, 1)).await.link_downed, 1);
    assert_eq!(read_ok(&m, CounterPort::EndPort(N0)).await.link_downed, 1);
    // An end node powered off: the switch port facing it (its link is up).
    m.set_end_port_state(N1, false).await.unwrap();
    assert_eq!(read_ok(&m, sw(L0, 2)).await.link_downed, 1);
    // A spine powered off: the leaf ports facing it.
    m.set_switch_state(S1, false).await.unwrap();
    assert_eq!(read_ok(&m, sw(L0, 4)).await.link_downed, 1);
    assert_eq!(read_ok(&m, sw(L1, 4)).await.link_downed, 1);
    assert_eq!(read_ok(&m, sw(L1, 3)).await.link_downed, 0);
}

#[tokio::test(start_paused = true)]
async fn a_read_costs_one_latency_for_the_batch() {
    let m = MockFabric::new(two_level())
        .with_config(MockConfig {
            op_latency: Duration::from_millis(40),
            error_rate: 1.0,
            ..MockConfig::default()
        })
        .unwrap();
    let t = tokio::time::Instant::now();
    let r = m.read_port_counters(&every_port(&m)).await.unwrap();
    assert_eq!(t.elapsed(), Duration::from_millis(40));
    // Reads never fail at random, whatever the error rate of block writes.
    assert!(r.iter().all(|r| r.counters.is_ok()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any sequence of drills: every field is the saturating sum of what was added to that port,
    /// and no other port moves.
    #[test]
    fn drills_saturate_per_field_and_stay_on_their_port(
        drills in proptest::collection::vec((0usize..8, 0usize..17, proptest::num::u64::ANY), 1..40)
    ) {
        let m = MockFabric::new(two_level());
        let ports = [sw(L0, 1), sw(L0, 3), sw(L1, 4), sw(S0, 2), sw(S1, 1), CounterPort::EndPort(N0), sw(L1, 6), sw(L0, 2)];
        let mut expect = [[0u128; 17]; 8];
        for &(p, c, v) in &drills {
            // Small values most of the time so that sums are exercised below the maximum too.
            let v = if v % 3 == 0 { v } else { v % 50 };
            let counter = Counter::ALL[c];
            let mut delta = PortCounters::default();
            *delta.get_mut(counter) = v;
            m.add_port_errors(ports[p], &delta).unwrap();
            expect[p][c] += u128::from(v);
        }
        for (p, port) in ports.iter().enumerate() {
            let got = m.port_counters(*port).unwrap();
            for (c, counter) in Counter::ALL.into_iter().enumerate() {
                let want = expect[p][c].min(u128::from(counter.max())) as u64;
                prop_assert_eq!(got.get(counter), want, "{} {}", port, counter.name());
            }
        }
    }
}

fn with_rates(rates: Vec<PortErrorRate>, seed: u64) -> MockFabric {
    MockFabric::new(two_level())
        .with_config(MockConfig {
            port_error_rates: rates,
            seed,
            ..MockConfig::default()
        })
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn background_errors_accrue_at_their_rate_on_their_port_only() {
    let rate = |port, counter, per_second| PortErrorRate {
        port,
        counter,
        per_second,
    };
    let m = with_rates(
        vec![
            rate(sw(L0, 3), Counter::SymbolErrors, 10.0),
            rate(CounterPort::EndPort(N1), Counter::RcvErrors, 0.5),
        ],
        7,
    );
    tokio::time::advance(Duration::from_millis(2500)).await;
    assert_eq!(read_ok(&m, sw(L0, 3)).await.symbol_errors, 25);
    // A fractional mean: whole part plus a seeded draw; over many reads the mean holds.
    for _ in 0..999 {
        tokio::time::advance(Duration::from_secs(1)).await;
        m.read_port_counters(&[sw(L1, 1)]).await.unwrap();
    }
    let n1 = m.port_counters(CounterPort::EndPort(N1)).unwrap().rcv_errors;
    assert!((400..=600).contains(&n1), "{n1} errors in 1001.5 s at 0.5/s");
    // No other port moved.
    for p in every_port(&m) {
        if p != sw(L0, 3) && p != CounterPort::EndPort(N1) {
            assert_eq!(m.port_counters(p).unwrap(), PortCounters::default(), "{p}");
        }
    }
    // Saturation: symbol errors stop at 65535.
    tokio::time::advance(Duration::from_secs(100_000)).await;
    assert_eq!(read_ok(&m, sw(L0, 3)).await.symbol_errors, 65535);
}

#[tokio::test(start_paused = true)]
async fn background_errors_are_deterministic_for_a_seed() {
    let run = |seed| async move {
        let m = with_rates(
            vec![PortErrorRate {
                port: sw(S0, 2),
                counter: Counter::LinkErrorRecovery,
                per_second: 0.3,
            }],
            seed,
        );
        let mut seen = Vec::new();
        for _ in 0..50 {
            tokio::time::advance(Duration::from_secs(1)).await;
            seen.push(read_ok(&m, sw(S0, 2)).await.link_error_recovery);
        }
        seen
    };
    assert_eq!(run(3).await, run(3).await);
    assert_ne!(run(3).await, run(4).await);
}

#[test]
fn bad_background_error_ports_and_rates_are_refused_naming_them() {
    let m = MockFabric::new(two_level());
    let mut cfg = m.config();
    cfg.port_error_rates = vec![PortErrorRate {
        port: sw(L0, 40),
        counter: Counter::SymbolErrors,
        per_second: 1.0,
    }];
    let e = m.set_config(cfg.clone()).unwrap_err().to_string();
    assert!(
        e.contains("port_error_rates[0]") && e.contains("0x0000000000000010[40]"),
        "{e}"
    );
    cfg.port_error_rates[0].port = sw(L0, 4);
    cfg.port_error_rates[0].per_second = f64::NAN;
    let e = m.set_config(cfg).unwrap_err().to_string();
    assert!(e.contains("symbol_errors") && e.contains("NaN"), "{e}");
}
