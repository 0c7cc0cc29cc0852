//! Tests of the agents' view of the data plane: refreshed in place from the mock's state, it
//! pushes the port events a comparison of whole discovered fabric models (the simulator's
//! earlier way, issue #17) gives, and ends equal to a fresh read.

use std::net::SocketAddr;

use fabric_topology::{gen, EndPortId, FabricEvent};
use proptest::prelude::*;

use super::*;

/// 4 leaves of 4 end ports, 4 spines; every leaf has one cable to every spine.
const SPEC: &str = "XGFT(2;4,4;1,4)";

fn sim(mock: MockFabric) -> Sim {
    let cabling = mock.cabling().clone();
    let agents = cabling
        .switch_ids()
        .map(|sid| {
            let s = cabling.switch(sid);
            AgentCtl::new(s.guid, sid, SocketAddr::from(([127, 0, 0, 1], 0)), 0, s.nports, 8)
        })
        .collect();
    Sim {
        addrs: Mutex::new(Addrs {
            lmc: 0,
            switch_lid: vec![0; cabling.num_switches()],
            end_base: vec![0; cabling.num_end_ports()],
            dirty: false,
        }),
        state: tokio::sync::Mutex::new(LiveView::read(&mock)),
        mock: Arc::new(mock),
        agents,
        max_lid: 0xFFFF,
        address_bits: 16,
        vls: 8,
        without_sl_to_vl: false,
        without_read_lft_blocks: false,
        counters: Counters::default(),
        refusal_log: Default::default(),
        cabling,
    }
}

/// A port's state in a discovered model.
fn model_live(f: &Fabric, sid: SwitchId, pn: PortNum) -> bool {
    match f.switch(sid).ports[pn as usize].remote {
        Remote::None => false,
        Remote::Switch { .. } => f.switch_link_live(sid, pn).is_some(),
        Remote::EndPort(ep) => f.end_port_live(ep),
    }
}

/// An event as compared: (port, state, neighbour GUID, powered).
type Seen = (u32, i32, Option<Guid>, bool);

fn seen(ev: &proto::PortEvent) -> Seen {
    (
        ev.port,
        ev.state,
        ev.neighbour.as_ref().map(|n| n.node_guid),
        ev.powered,
    )
}

/// The events of switch `sid` from comparing the models `old` and `new`.
fn expected(old: &Fabric, new: &Fabric, sid: SwitchId) -> Vec<Seen> {
    let (o, n) = (old.switch(sid), new.switch(sid));
    let mut out = Vec::new();
    if o.up != n.up {
        out.push((0, 0, None, n.up));
    }
    for pn in 1..=n.nports {
        let up = model_live(new, sid, pn);
        if model_live(old, sid, pn) != up {
            let neighbour = match n.ports[pn as usize].remote {
                Remote::None => None,
                Remote::Switch { sw, .. } => Some(new.switch(sw).guid),
                Remote::EndPort(ep) => Some(new.end_port(ep).node_guid),
            };
            let state = if up { PortState::Up } else { PortState::Down } as i32;
            out.push((u32::from(pn), state, neighbour, n.up));
        }
    }
    out
}

/// One state change: (kind 0 cable / 1 switch / 2 end port, which, up).
fn change() -> impl Strategy<Value = (u8, usize, bool)> {
    (0u8..3, any::<usize>(), any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn refresh_pushes_the_events_of_the_model_comparison(
        initial_down in proptest::collection::vec(any::<usize>(), 0..3),
        changes in proptest::collection::vec(change(), 1..16),
    ) {
        let mut f = gen::generate_str(SPEC, None).unwrap();
        // Initial faults of the source (cables down before the simulator starts).
        for i in initial_down {
            let sid = SwitchId((i % f.num_switches()) as u32);
            let s = f.switch(sid);
            let cabled: Vec<PortNum> =
                s.external_ports().filter(|(_, p)| p.remote != Remote::None).map(|(pn, _)| pn).collect();
            let ev = FabricEvent::LinkDown { switch: s.guid, port: cabled[i % cabled.len()] };
            f = f.apply(&[ev]).unwrap();
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let sim = sim(MockFabric::new(f.clone()));
        let mut rx: Vec<_> = sim.agents.iter().map(|a| a.events.subscribe()).collect();
        let mut old = rt.block_on(sim.mock.discover()).unwrap();
        for (kind, i, up) in changes {
            rt.block_on(async {
                match kind {
                    0 => {
                        let s = f.switch(SwitchId((i % f.num_switches()) as u32));
                        let cabled: Vec<PortNum> =
                            s.external_ports().filter(|(_, p)| p.remote != Remote::None).map(|(pn, _)| pn).collect();
                        sim.mock.set_port_state(s.guid, cabled[i % cabled.len()], up).await.unwrap();
                    }
                    1 => {
                        let g = f.switch(SwitchId((i % f.num_switches()) as u32)).guid;
                        sim.mock.set_switch_state(g, up).await.unwrap();
                    }
                    _ => {
                        let g = f.end_port(EndPortId((i % f.num_end_ports()) as u32)).port_guid;
                        sim.mock.set_end_port_state(g, up).await.unwrap();
                    }
                }
                sim.refresh().await.unwrap();
            });
            let new = rt.block_on(sim.mock.discover()).unwrap();
            for (sid, rx) in f.switch_ids().zip(rx.iter_mut()) {
                let mut got = Vec::new();
                while let Ok(ev) = rx.try_recv() {
                    got.push(seen(&ev));
                }
                prop_assert_eq!(got, expected(&old, &new, sid), "switch {}", sid.0);
            }
            let view = rt.block_on(sim.state.lock());
            let fresh = LiveView::read(&sim.mock);
            prop_assert_eq!(&view.powered, &fresh.powered);
            prop_assert_eq!(&view.live, &fresh.live);
            old = new;
        }
    }
}
