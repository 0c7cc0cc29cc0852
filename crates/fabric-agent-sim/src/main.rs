//! `fabric-agent-sim`: a simulated out-of-band managed fabric, one switch management agent per
//! switch, for the `oob` driver's tests, benches and fault drills.
//!
//! ```text
//! fabric-agent-sim --generate 'XGFT(2;4,4;1,4)' --inventory /tmp/agents.inv
//! fabric-agent-sim --topology fabric.topo --inventory /tmp/agents.inv --address-bits 24
//! ```
//!
//! # One endpoint per switch
//!
//! Every simulated switch gets **its own tonic server on `127.0.0.1:0`** (an ephemeral port),
//! exactly as a real BXI-like switch is its own management endpoint: the driver under test opens
//! one connection per switch, bounds them, times them out and reconnects them individually, and
//! killing one agent really closes one listener and its connections. The cost is one listening
//! socket and one HTTP/2 connection per switch (two file descriptors, a few kB each): at start
//! the simulator raises its soft open-file limit to the hard limit and refuses to start when
//! the agents would not fit in it (`fabric_oob::fds::simulator_fds`: two descriptors per agent
//! and a reserve), naming the limit to raise, rather than failing with `EMFILE` later; it also
//! warns when the ephemeral port range is too narrow for the listeners and a driver on the same
//! host. `--max-agents N` is an explicit cap on top of that. The 6 804 switches of
//! `PGFT(4;18,3,18,36;1,3,18,18;1,6,1,1)` need about 13 900 descriptors.
//!
//! When every agent is bound, the simulator writes the **inventory** (`GUID address  # name`
//! lines plus `!control ADDRESS`, see `fabric_oob::Inventory`) atomically and prints `ready
//! INVENTORY` on stdout.
//! `--reuse-inventory` binds the addresses of an existing inventory instead (a restarted
//! simulator comes back where the driver expects it).
//!
//! # State
//!
//! The data plane is a [`fabric_mock::MockFabric`]: real LFT bytes per switch, LIDs, link
//! and power states, hop-by-hop packet traces over the installed tables. Agents write and read
//! its LFTs; addresses set through agents are installed into it before every trace.
//!
//! # SL-to-VL
//!
//! Each agent keeps one 16-entry SL-to-VL table for the whole switch (`SetSlToVl` /
//! `GetSlToVl`; all VL 0 until set), and reports `--vls` virtual lanes in `Describe` (the VLs
//! the ports operate by default; the `oob` driver puts its escape VL on the highest). Each
//! switch also has a **VLCap** (`SwitchInfo.vl_cap`): the data VLs its ports can operate, 8 by
//! default (VL0-7, as BXI-class hardware; `--vl-cap N` for every switch, `--vl-cap-of GUID=N`
//! for one, never below `--vls`). `SetSlToVl` refuses a table using a VL at or above the
//! switch's VLCap (INVALID_ARGUMENT naming the switch, the SL and the VL) and keeps the table in
//! force: a data VL plan (a VL layering) fits when it needs no more VLs than the smallest
//! VLCap. The table is switch configuration: it survives `kill`/`restore` of the agent.
//!
//! # Multicast
//!
//! Each agent holds its switch's multicast forwarding table (`WriteMftBlocks` /
//! `ReadMftBlock`, blocks of 32 MLIDs from 0xC000 times 16 ports per position; 512 blocks).
//! `verify` also floods every MLID in use: its receivers are the live end ports whose bit is
//! set on their switch's port; the packet of each receiver (a switch forwards a copy out of
//! every port of the mask but the arrival port; dead links drop it) must reach every other
//! receiver exactly once, no other end port, and no switch twice (a loop or a second path).
//! Failures name the MLID, the sender and the end port or switch.
//!
//! # Management key
//!
//! `SetManagementKey` sets a key and a protect level (0..=2; see `agent.proto`): with a
//! non-zero key, writes without it are refused (PERMISSION_DENIED naming the switch), and so
//! are reads at level 2. Refusals are counted per agent (`GetCounters.refusals`, `status`).
//! The key is switch configuration: it survives `kill`/`restore`; `mkey-clear` resets it.
//!
//! # Manager epoch (write fencing)
//!
//! Each agent keeps the highest manager epoch it has seen (request metadata
//! `fabric-manager-epoch`, see `agent.proto`): any request that passes the management key check
//! raises it, reads included (`Describe` reports it); a write with a lower epoch is refused
//! (FAILED_PRECONDITION `stale manager epoch N: this switch follows epoch M`, response metadata
//! `fabric-manager-epoch: M`), nothing of it applied, counted and logged on stderr (at most 20
//! lines a second, the rest summed up). `WriteLftBlocks` and `WriteMftBlocks` check the epoch
//! again just before their blocks are applied (after `write-delay`). Missing metadata is epoch
//! 0; a value that is not a decimal u64 is INVALID_ARGUMENT naming the entry.
//! `SimControl.GetEpochStats` (and the `epochs` command) reports per switch the epoch, the writes
//! accepted and refused and the last refused epoch. The epoch is kept in the simulator's memory
//! only: it survives `kill`/`restore` of an agent (as a real agent keeping it in non-volatile
//! memory would) and is forgotten when the simulator restarts; `epoch-forget` resets it.
//!
//! # Port counters
//!
//! Every switch port has the counters of `fabric_southbound::PortCounters`, kept by the data
//! plane (the mock) and served by `ReadPortCounters` (all ports or a list; one entry per port,
//! a port that cannot be read has its own error). They move only through:
//!
//! * drills: the control call `AddPortErrors` (switch GUID, port, counter deltas) and the
//!   command `port-errors`, saturating each counter at its IBA field's width as the hardware
//!   does;
//! * link losses: `link-down`, `switch-down` and `node-down` add 1 to `link_downed` on the
//!   surviving ends of each live link they cut.
//!
//! The simulator moves no traffic (traces are checks), so data, packet and `xmit_wait` counters
//! stay 0 unless a drill adds to them. The counters belong to the switch, not to its agent:
//! `kill`/`restore` of the agent keeps them (a real switch's ASIC keeps counting while its
//! management agent restarts), and so does `switch-down`/`switch-up`, which in this simulator
//! keeps the switch's tables too (no reboot). Ports of a powered-off switch answer an error.
//! `GetCounters.port_counter_reads` counts the `ReadPortCounters` calls.
//!
//! # Control
//!
//! Console commands (stdin lines) and the `SimControl.Command` RPC share one grammar; switches
//! are named by GUID or description, `all` means every agent:
//!
//! | command | effect |
//! |---|---|
//! | `link-down SW PORT` / `link-up SW PORT` | fail / restore a cable (both ends see it) |
//! | `switch-down SW` / `switch-up SW` | power the switch's data plane off / on (agent stays) |
//! | `node-down PORTGUID` / `node-up PORTGUID` | end port off / on |
//! | `kill SW\|all` / `restore SW\|all` | agent stops answering (listener and connections closed) / comes back on the same address |
//! | `drop SW\|all` | close the agent's connections (it keeps listening) |
//! | `delay SW\|all MS` | delay every reply of the agent by MS milliseconds |
//! | `write-delay SW\|all MS` | delay every `WriteLftBlocks` call by MS milliseconds before its blocks are applied |
//! | `verify [escape]` | trace every connected pair of live end ports, then check multicast (below) |
//! | `verify-mcast` | check multicast only, listing the first failures |
//! | `mkey-clear SW\|all` | reset the management key (an administrator's reset of the switch) |
//! | `epochs` | per switch: the highest manager epoch seen, writes accepted and refused for a stale epoch, the last refused epoch |
//! | `epoch-forget SW\|all` | forget the manager epoch, counts kept (an agent that restarted without persisting it) |
//! | `trace SRCPORTGUID LID` | trace one packet |
//! | `port-errors SW PORT COUNTER=N...` | add to a port's counters (e.g. `symbol_errors=10 link_downed=1`; names as in `fabric_southbound::Counter::name`) |
//! | `port-counters SW [PORT]` | print the non-zero counters of a port (or of every port) |
//! | `status` | counts |
//! | `quit` | exit |

mod sim;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Serves one simulated management agent per switch of a topology.
#[derive(Parser, Debug)]
#[command(name = "fabric-agent-sim", version)]
pub struct Args {
    /// Topology file (ibnetdiscover / ibsim format).
    #[arg(long, conflicts_with = "generate", required_unless_present = "generate")]
    pub topology: Option<PathBuf>,
    /// Generator string, e.g. `PGFT(2;4,4;1,4;1,1)` or `KARY(4,3)`.
    #[arg(long)]
    pub generate: Option<String>,
    /// Where to write the inventory (GUID -> agent address).
    #[arg(long)]
    pub inventory: PathBuf,
    /// Bind the addresses listed in an existing `--inventory` file instead of ephemeral ports.
    #[arg(long)]
    pub reuse_inventory: bool,
    /// Address width in bits (highest address = 2^bits - 1).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(8..=31))]
    pub address_bits: u32,
    /// Refuse to start above this many switches (default: as many as the open-file limit
    /// allows, two descriptors per agent).
    #[arg(long)]
    pub max_agents: Option<usize>,
    /// Do not read console commands from stdin.
    #[arg(long)]
    pub no_console: bool,
    /// Delay every `WriteLftBlocks` call by this many milliseconds before its blocks are applied
    /// (a slow switch management CPU). Crash tests use it to stop a manager in the middle of an
    /// upload; the console command `write-delay` changes it at run time.
    #[arg(long, default_value_t = 0)]
    pub write_delay_ms: u64,
    /// Virtual lanes each switch port operates (reported in `Describe`; `SetSlToVl` accepts VLs
    /// below it).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=15))]
    pub vls: u8,
    /// VLCap of every switch: the data VLs its ports can operate (reported in `Describe` as
    /// `vl_cap`; `SetSlToVl` accepts VLs below it, for VL layerings). Default 8 (VL0-7, as
    /// BXI-class and most InfiniBand switches); raised to `--vls` when below it.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=15))]
    pub vl_cap: u8,
    /// VLCap of one switch, `GUID=N` (GUID in hex, `0x` optional; N in 1..=15, at least
    /// `--vls`); repeatable. Overrides `--vl-cap` for that switch.
    #[arg(long, value_name = "GUID=N")]
    pub vl_cap_of: Vec<String>,
    /// Answer `SetSlToVl` and `GetSlToVl` with UNIMPLEMENTED, as an agent that predates them.
    #[arg(long)]
    pub without_sl_to_vl: bool,
    /// Answer `ReadLftBlocks` with UNIMPLEMENTED, as an agent that predates it (managers fall
    /// back to one `ReadLftBlock` per block).
    #[arg(long)]
    pub without_read_lft_blocks: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fabric-agent-sim: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(sim::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fabric-agent-sim: {e}");
            ExitCode::FAILURE
        }
    }
}
