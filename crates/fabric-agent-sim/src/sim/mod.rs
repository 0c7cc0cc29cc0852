//! The simulator: data plane ([`MockFabric`]), one killable agent server per switch, the control
//! service and the console.
//!
//! `state` holds the simulator's state, `io` the connections it can cut, `agent` the agent
//! servers, `mcast` the multicast forwarding tables and their verification, `mkey` the
//! management key checks, `epoch` the manager epoch checks (write fencing), `command` the
//! console grammar, `control` the control service; this module starts them all.

mod agent;
mod command;
mod control;
mod epoch;
mod io;
mod mcast;
mod mkey;
mod state;
mod vlcap;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use fabric_mock::{MockConfig, MockFabric};
use fabric_oob::proto::sim_control_server::SimControlServer;
use fabric_oob::{fds, AgentKey, Inventory, InventoryEntry};
use fabric_topology::{fmt_guid, Lid, SwitchId};
use tokio::io::AsyncBufReadExt;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;

use self::agent::{spawn_agent, MAX_MESSAGE};
use self::control::ControlSvc;
pub use self::state::SimError;
use self::state::{Addrs, AgentCtl, Counters, LiveView, Sim};
use crate::Args;

async fn bind(addr: SocketAddr) -> Result<TcpListener, SimError> {
    TcpListener::bind(addr).await.map_err(|err| SimError::Io {
        what: format!("bind {addr}"),
        err,
    })
}

/// Raises the open-file limit to the hard limit and checks that `n` agents fit in it (a
/// listener and the driver's connection each) and, listening on ephemeral ports (not
/// `--reuse-inventory`), in the ephemeral port range (an error when the listeners alone do not
/// fit, a warning when a driver on this host may lack ports to connect to all of them).
fn check_budget(name: &str, n: usize, reuse_inventory: bool) -> Result<(), SimError> {
    let limits = fds::raise_fd_limit();
    fds::check_fds(n, fds::simulator_fds(n), limits).map_err(|e| SimError::Topology(format!("{name}: {e}")))?;
    if reuse_inventory {
        return Ok(());
    }
    match fds::ephemeral_port_range().map(|r| fds::check_ports(n, r)) {
        Some(fds::PortBudget::TooSmall(m)) => Err(SimError::Topology(format!("{name}: {m}"))),
        Some(fds::PortBudget::Tight(m)) => {
            eprintln!("warning: {m}");
            Ok(())
        }
        Some(fds::PortBudget::Fits) | None => Ok(()),
    }
}

/// Starts everything, writes the inventory, then serves until `quit`, SIGTERM or Ctrl-C.
pub async fn run(args: Args) -> Result<(), SimError> {
    let (mock, name) = match (&args.topology, &args.generate) {
        (Some(p), _) => (MockFabric::from_topology_file(p)?, p.display().to_string()),
        (None, Some(g)) => (MockFabric::from_generator(g, None)?, g.clone()),
        (None, None) => return Err(SimError::Topology("give --topology FILE or --generate SPEC".into())),
    };
    for w in mock.topology_warnings() {
        eprintln!("warning: {w}");
    }
    let max_lid: Lid = ((1u64 << args.address_bits) - 1) as Lid;
    let mock = mock.with_config(MockConfig {
        max_lid,
        escape_vl: None,
        ..MockConfig::default()
    })?;
    let cabling = mock.cabling().clone();
    let n = cabling.num_switches();
    if let Some(max) = args.max_agents.filter(|&m| n > m) {
        return Err(SimError::Topology(format!(
            "{name}: {n} switches exceed --max-agents {max}"
        )));
    }
    check_budget(&name, n, args.reuse_inventory)?;
    let vl_caps = vlcap::VlCaps::parse(args.vl_cap, args.vls, &args.vl_cap_of, &cabling)?;
    let previous = if args.reuse_inventory {
        Some(Inventory::read_file(&args.inventory)?)
    } else {
        None
    };
    let mut listeners = Vec::with_capacity(n);
    for s in cabling.switches() {
        let addr: SocketAddr = match &previous {
            Some(inv) => inv
                .entries
                .iter()
                .find(|e| e.key == AgentKey::Guid(s.guid) || e.key == AgentKey::Name(s.desc.clone()))
                .and_then(|e| e.address.parse().ok())
                .ok_or_else(|| {
                    SimError::Topology(format!("switch {} is not in the reused inventory", fmt_guid(s.guid)))
                })?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        listeners.push(bind(addr).await?);
    }
    let control_addr = match previous
        .as_ref()
        .and_then(|i| i.control.as_ref())
        .and_then(|c| c.parse().ok())
    {
        Some(a) => a,
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let control = bind(control_addr).await?;
    let mut agents = Vec::with_capacity(n);
    for (i, l) in listeners.iter().enumerate() {
        let addr = l.local_addr().map_err(|err| SimError::Io {
            what: "local address".into(),
            err,
        })?;
        let s = &cabling.switches()[i];
        agents.push(AgentCtl::new(
            s.guid,
            SwitchId(i as u32),
            addr,
            args.write_delay_ms,
            s.nports,
            vl_caps.of(s.guid),
        ));
    }
    let state = LiveView::read(&mock);
    let sim = Arc::new(Sim {
        addrs: Mutex::new(Addrs {
            lmc: 0,
            switch_lid: vec![0; n],
            end_base: vec![0; cabling.num_end_ports()],
            dirty: false,
        }),
        mock: Arc::new(mock),
        state: tokio::sync::Mutex::new(state),
        agents,
        max_lid,
        address_bits: args.address_bits,
        vls: args.vls,
        without_sl_to_vl: args.without_sl_to_vl,
        without_read_lft_blocks: args.without_read_lft_blocks,
        counters: Counters::default(),
        refusal_log: Default::default(),
        cabling,
    });
    for (i, l) in listeners.into_iter().enumerate() {
        spawn_agent(sim.clone(), i, l);
    }
    let control_local = control.local_addr().map_err(|err| SimError::Io {
        what: "control address".into(),
        err,
    })?;
    let ctl = SimControlServer::new(ControlSvc { sim: sim.clone() }).max_encoding_message_size(MAX_MESSAGE);
    tokio::spawn(async move {
        let _ = Server::builder()
            .add_service(ctl)
            .serve_with_incoming(TcpListenerStream::new(control))
            .await;
    });

    let inv = Inventory {
        control: Some(control_local.to_string()),
        entries: sim
            .agents
            .iter()
            .map(|a| InventoryEntry {
                key: AgentKey::Guid(a.guid),
                address: a.addr.to_string(),
                comment: sim.cabling.switch(a.sid).desc.replace('#', " "),
                line: 0,
            })
            .collect(),
    };
    // Atomically: the daemon may read the inventory while it is replaced.
    atomic_write_file::AtomicWriteFile::open(&args.inventory)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, inv.to_text().as_bytes())?;
            f.commit()
        })
        .map_err(|err| SimError::Io {
            what: args.inventory.display().to_string(),
            err,
        })?;
    println!("ready {}", args.inventory.display());

    if !args.no_console {
        let sim = sim.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match sim.command(&line).await {
                    Ok(out) if out.is_empty() => {}
                    Ok(out) => println!("{out}"),
                    Err(e) => println!("error: {e}"),
                }
            }
        });
    }
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|err| SimError::Io {
            what: "SIGTERM handler".into(),
            err,
        })?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}
