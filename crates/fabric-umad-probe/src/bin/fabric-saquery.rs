//! `fabric-saquery`: the project's own Subnet Administration client. It asks the master SM's
//! SA (fabricd's or OpenSM's) from an end node and prints one JSON document per answer
//! (`{"attribute", "method", "status", "records", "raw_records_hex", ...}`), reading whole
//! tables with RMPP in user space ([`fabric_umad::client::SaClient`]). It also acts as a
//! multicast end node: `join` / `leave` (MCMemberRecord Set / Delete) and `mcast-cycles`
//! (many join/leave round trips in one process: MLID allocation and release, join latency).
//!
//! Under the ibsim simulator run it like the infiniband-diags tools:
//! `LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so SIM_HOST=<node>
//! IBSIM_SOCKNAME=<sock> fabric-saquery nr 3`.
//!
//! A non-zero MAD status is printed like any answer (exit code 0): the tests and the bench
//! read it; no answer at all (timeout, RMPP failure) is an error (exit code 1).

#[path = "../saquery/mod.rs"]
mod saquery;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use fabric_sa::wire::attr;
use fabric_umad::client::{ClientConfig, Malformed, SaClient, SaQuery};
use saquery::templates::{self, parse_gid, parse_hex, parse_u64, size};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(
    name = "fabric-saquery",
    about = "Subnet Administration queries from an end node (JSON out)"
)]
struct Cli {
    /// CA name (`mlx5_0`; `ibsim0` under the simulator shim): its first umad port.
    #[arg(long, global = true)]
    ca: Option<String>,
    /// umad device (default /dev/infiniband/umad0).
    #[arg(long, global = true)]
    device: Option<PathBuf>,
    /// The SA's LID (default: the port's MasterSMLID).
    #[arg(long, global = true)]
    sm_lid: Option<u16>,
    /// Deadline of one attempt, in milliseconds.
    #[arg(long, global = true, default_value_t = 1000)]
    timeout_ms: u64,
    /// Attempts after the first.
    #[arg(long, global = true, default_value_t = 3)]
    retries: u32,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// NodeRecords (one by LID, or the table).
    Nr { lid: Option<u16> },
    /// PortInfoRecords (a LID's ports, one port, or the table).
    Pir { lid: Option<u16>, port: Option<u8> },
    /// SwitchInfoRecords.
    Swir { lid: Option<u16> },
    /// LinkRecords (the table).
    Lr,
    /// LinearForwardingTableRecords (a switch's blocks, one block, or the table).
    Lftr { lid: Option<u16>, block: Option<u16> },
    /// GUIDInfoRecords.
    Gir { lid: Option<u16> },
    /// SMInfoRecords.
    Smir,
    /// ServiceRecords.
    Sr,
    /// InformInfoRecords.
    Iir,
    /// MCMemberRecords.
    Mcmr,
    /// Joins a multicast group or creates it (Set MCMemberRecord), one request per port GID.
    Join(saquery::mcast::JoinArgs),
    /// Leaves a multicast group (Delete MCMemberRecord), one request per port GID.
    Leave(saquery::mcast::MemberArgs),
    /// N join/leave round trips of one member (MLID allocation and release, join latency).
    McastCycles(saquery::mcast::CyclesArgs),
    /// The SA's ClassPortInfo.
    Classportinfo,
    /// PathRecords (GetTable as `saquery` asks; no arguments: the whole table).
    Pr {
        #[arg(long)]
        slid: Option<u16>,
        #[arg(long)]
        dlid: Option<u16>,
        #[arg(long)]
        sgid: Option<String>,
        #[arg(long)]
        dgid: Option<String>,
        #[arg(long)]
        numb_path: Option<u8>,
    },
    /// MultiPathRecords (GetMulti) between GIDs.
    Mpr {
        #[arg(long, required = true)]
        sgid: Vec<String>,
        #[arg(long, required = true)]
        dgid: Vec<String>,
        #[arg(long, default_value_t = 1)]
        numb_path: u8,
    },
    /// Registers a ServiceRecord (Set).
    SrRegister {
        #[arg(long)]
        id: String,
        #[arg(long)]
        name: String,
        /// Service GID (default: this port's GID).
        #[arg(long)]
        gid: Option<String>,
        #[arg(long, default_value_t = 0xffff_ffff)]
        lease: u32,
    },
    /// Deletes a ServiceRecord (Delete).
    SrDelete {
        #[arg(long)]
        id: String,
        #[arg(long)]
        gid: Option<String>,
    },
    /// Subscribes to a trap (Set InformInfo) and prints the Reports received (JSON lines).
    Subscribe {
        #[arg(long)]
        trap: u16,
        /// Seconds to wait for Reports after subscribing.
        #[arg(long, default_value_t = 0)]
        wait_report: u64,
        /// Unsubscribe instead.
        #[arg(long)]
        unsubscribe: bool,
    },
    /// Sends an arbitrary SA MAD (for malformed-request tests).
    Raw {
        #[arg(long, value_parser = parse_u8)]
        method: u8,
        #[arg(long, value_parser = parse_u16)]
        attr: u16,
        #[arg(long, default_value = "0")]
        attr_mod: String,
        #[arg(long, default_value = "0")]
        mask: String,
        #[arg(long, default_value = "")]
        data: String,
        /// AttributeOffset of the request (8-byte words).
        #[arg(long, default_value_t = 0)]
        attr_offset: u16,
        /// Class version to send (malformed: anything but 2).
        #[arg(long, value_parser = parse_u8)]
        class_version: Option<u8>,
        /// The RMPP header to send, 12 bytes of hex (bytes 24..36 of the MAD).
        #[arg(long)]
        rmpp_hex: Option<String>,
        /// Bytes of the MAD put on the wire (malformed: fewer than 256).
        #[arg(long)]
        mad_bytes: Option<usize>,
    },
    /// Test tool (simulator only): serve a known table to every GetTable as an RMPP transfer.
    #[command(hide = true)]
    ServeTable {
        #[arg(long, default_value_t = 50)]
        records: usize,
        #[arg(long, default_value_t = 64)]
        record_size: usize,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
    },
    /// Measures the SA: single PathRecord Gets between random CA pairs, or whole tables.
    Bench {
        #[arg(long, default_value_t = 1000)]
        queries: usize,
        #[arg(long, default_value_t = 4)]
        clients: usize,
        #[arg(long)]
        pr_table: bool,
        /// Highest LID probed when the NodeRecord table arrives cut (simulator shim).
        #[arg(long, default_value_t = 256)]
        max_probe_lid: u16,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run this many bench processes at once (each its own agent; `--queries` is split).
        #[arg(long, default_value_t = 0)]
        processes: usize,
        /// SIM_HOST of each process, in turn (simulator: clients on several nodes).
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        /// Print every latency (for a parent merging processes).
        #[arg(long, hide = true)]
        latencies: bool,
    },
}

/// `bench --processes P`: P copies of this program's bench at once, merged.
#[allow(clippy::too_many_arguments)]
fn bench_processes(
    cli: &Cli,
    queries: usize,
    clients: usize,
    pr_table: bool,
    max_probe_lid: u16,
    seed: u64,
    processes: usize,
    hosts: &[String],
) -> Result<()> {
    let exe = std::env::current_exe().context("locating fabric-saquery")?;
    let per = queries.div_ceil(processes);
    let t0 = Instant::now();
    let mut children = Vec::new();
    for k in 0..processes {
        let mut cmd = std::process::Command::new(&exe);
        if let Some(ca) = &cli.ca {
            cmd.args(["--ca", ca]);
        }
        if let Some(d) = &cli.device {
            cmd.arg("--device").arg(d);
        }
        if let Some(l) = cli.sm_lid {
            cmd.args(["--sm-lid", &l.to_string()]);
        }
        cmd.args([
            "--timeout-ms",
            &cli.timeout_ms.to_string(),
            "--retries",
            &cli.retries.to_string(),
        ]);
        cmd.args([
            "bench",
            "--latencies",
            "--queries",
            &per.to_string(),
            "--clients",
            &clients.to_string(),
        ]);
        cmd.args([
            "--max-probe-lid",
            &max_probe_lid.to_string(),
            "--seed",
            &(seed + k as u64).to_string(),
        ]);
        if pr_table {
            cmd.arg("--pr-table");
        }
        if !hosts.is_empty() {
            cmd.env("SIM_HOST", &hosts[k % hosts.len()]);
        }
        cmd.stdout(std::process::Stdio::piped());
        children.push(cmd.spawn().with_context(|| format!("starting bench process {k}"))?);
    }
    let mut results = Vec::new();
    for (k, ch) in children.into_iter().enumerate() {
        let out = ch.wait_with_output().with_context(|| format!("bench process {k}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .rfind(|l| l.starts_with('{'))
            .with_context(|| format!("bench process {k} printed no result ({})", out.status))?;
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("bench process {k}: {line}"))?;
        results.push(v["bench"].clone());
    }
    print(&json!({ "bench": saquery::bench::merge(&results, t0.elapsed()) }));
    Ok(())
}

fn parse_u8(s: &str) -> Result<u8> {
    u8::try_from(parse_u64(s)?).with_context(|| format!("{s} does not fit 8 bits"))
}

fn parse_u16(s: &str) -> Result<u16> {
    u16::try_from(parse_u64(s)?).with_context(|| format!("{s} does not fit 16 bits"))
}

fn print(v: &serde_json::Value) {
    println!("{v}");
}

fn ask(c: &SaClient, q: SaQuery) -> Result<()> {
    let what = format!(
        "{} {}",
        saquery::output::method_name(q.method),
        saquery::output::attribute_name(q.attr_id)
    );
    let a = c.query(q).with_context(|| what.clone())?;
    let mut doc = saquery::output::answer(&a);
    doc["local_lid"] = json!(c.local().lid);
    doc["sm_lid"] = json!(c.local().sm_lid);
    print(&doc);
    Ok(())
}

fn own_gid(c: &SaClient, given: Option<&str>) -> Result<[u8; 16]> {
    match given {
        Some(g) => parse_gid(g),
        None => c.local().gid.with_context(|| {
            format!(
                "no GID of port {} of {} in sysfs: give --gid",
                c.local().port,
                c.local().ca
            )
        }),
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let cfg = ClientConfig {
        device: cli.device.clone(),
        ca: cli.ca.clone(),
        sm_lid: cli.sm_lid,
        timeout: Duration::from_millis(cli.timeout_ms.max(1)),
        retries: cli.retries,
        // Under ibsim, Reports reach only a client that opened issm.
        issm: matches!(cli.cmd, Cmd::Subscribe { wait_report, .. } if wait_report > 0)
            && fabric_umad::client::under_umad2sim(),
        ..ClientConfig::default()
    };
    if let Cmd::ServeTable {
        records,
        record_size,
        seconds,
    } = cli.cmd
    {
        let local = fabric_umad::client::local_port(&cfg)?;
        let guid = local
            .gid
            .map_or(0, |g| u64::from_be_bytes(g[8..16].try_into().unwrap_or([0; 8])));
        let stats = saquery::fake_sa::serve(&local.device, guid, records, record_size, seconds, || {
            print(&json!({ "ready": true, "lid": local.lid }));
        })?;
        print(&stats);
        return Ok(());
    }
    if let Cmd::Bench {
        queries,
        clients,
        pr_table,
        max_probe_lid,
        seed,
        processes,
        ref hosts,
        ..
    } = cli.cmd
    {
        if processes > 0 {
            return bench_processes(&cli, queries, clients, pr_table, max_probe_lid, seed, processes, hosts);
        }
    }
    let c = SaClient::open(&cfg).context("opening the SA client")?;
    match cli.cmd {
        Cmd::Nr { lid } => ask(&c, templates::node_records(lid)),
        Cmd::Pir { lid, port } => ask(&c, templates::port_info_records(lid, port)),
        Cmd::Swir { lid } => ask(&c, templates::switch_info_records(lid)),
        Cmd::Lr => ask(&c, templates::table(attr::LINK_RECORD, size::LINK_RECORD)),
        Cmd::Lftr { lid, block } => ask(&c, templates::lft_records(lid, block)),
        Cmd::Gir { lid } => ask(&c, templates::guid_info_records(lid)),
        Cmd::Smir => ask(&c, templates::table(attr::SM_INFO_RECORD, size::SM_INFO_RECORD)),
        Cmd::Sr => ask(&c, templates::table(attr::SERVICE_RECORD, size::SERVICE_RECORD)),
        Cmd::Iir => ask(&c, templates::table(attr::INFORM_INFO_RECORD, 0)),
        Cmd::Mcmr => ask(&c, templates::table(attr::MC_MEMBER_RECORD, 0)),
        Cmd::Classportinfo => ask(&c, templates::class_port_info()),
        Cmd::Join(a) => {
            for g in saquery::mcast::port_gids(&c, &a.member)? {
                ask(
                    &c,
                    saquery::mcast::join_request(&a, g)?.query(fabric_sa::wire::METHOD_SET),
                )?;
            }
            Ok(())
        }
        Cmd::Leave(m) => {
            for g in saquery::mcast::port_gids(&c, &m)? {
                ask(
                    &c,
                    saquery::mcast::leave_request(&m, g)?.query(fabric_sa::wire::METHOD_DELETE),
                )?;
            }
            Ok(())
        }
        Cmd::McastCycles(a) => {
            let v = saquery::mcast::cycles(&c, &a)?;
            print(&json!({ "mcast_cycles": v, "local_lid": c.local().lid, "sm_lid": c.local().sm_lid }));
            Ok(())
        }
        Cmd::Pr {
            slid,
            dlid,
            sgid,
            dgid,
            numb_path,
        } => {
            let sgid = sgid.as_deref().map(parse_gid).transpose()?;
            let dgid = dgid.as_deref().map(parse_gid).transpose()?;
            ask(&c, templates::path_records(slid, dlid, sgid, dgid, numb_path))
        }
        Cmd::Mpr { sgid, dgid, numb_path } => {
            let s: Vec<[u8; 16]> = sgid.iter().map(|g| parse_gid(g)).collect::<Result<_>>()?;
            let d: Vec<[u8; 16]> = dgid.iter().map(|g| parse_gid(g)).collect::<Result<_>>()?;
            ask(&c, templates::multi_path_records(&s, &d, numb_path)?)
        }
        Cmd::SrRegister { id, name, gid, lease } => {
            let gid = own_gid(&c, gid.as_deref())?;
            ask(&c, templates::service_register(parse_u64(&id)?, &name, &gid, lease)?)
        }
        Cmd::SrDelete { id, gid } => {
            let gid = own_gid(&c, gid.as_deref())?;
            ask(&c, templates::service_delete(parse_u64(&id)?, &gid)?)
        }
        Cmd::Subscribe {
            trap,
            wait_report,
            unsubscribe,
        } => {
            ask(&c, templates::inform_info(trap, !unsubscribe))?;
            let end = Instant::now() + Duration::from_secs(wait_report);
            loop {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                if let Some(r) = c.next_report(left) {
                    print(&saquery::output::report(&r));
                }
            }
            Ok(())
        }
        Cmd::Raw {
            method,
            attr,
            attr_mod,
            mask,
            data,
            attr_offset,
            class_version,
            rmpp_hex,
            mad_bytes,
        } => {
            let data = parse_hex(&data)?;
            anyhow::ensure!(
                data.len() <= fabric_sa::wire::SA_DATA_SIZE,
                "--data of {} bytes does not fit one MAD (200)",
                data.len()
            );
            let q = SaQuery {
                method,
                attr_id: attr,
                attr_mod: u32::try_from(parse_u64(&attr_mod)?).context("--attr-mod does not fit 32 bits")?,
                component_mask: parse_u64(&mask)?,
                attr_offset,
                data,
                malformed: Malformed {
                    class_version,
                    rmpp: rmpp_hex
                        .as_deref()
                        .map(|h| {
                            let b = parse_hex(h)?;
                            <[u8; 12]>::try_from(b.as_slice())
                                .map_err(|_| anyhow::anyhow!("--rmpp-hex needs 12 bytes, got {}", b.len()))
                        })
                        .transpose()?,
                    mad_bytes,
                },
                ..SaQuery::default()
            };
            ask(&c, q)
        }
        Cmd::ServeTable { .. } => Ok(()),
        Cmd::Bench {
            queries,
            clients,
            pr_table,
            max_probe_lid,
            seed,
            latencies,
            ..
        } => {
            let v = saquery::bench::run(
                &c,
                saquery::bench::BenchOptions {
                    queries,
                    clients,
                    pr_table,
                    max_probe_lid,
                    seed,
                    latencies,
                },
            )?;
            print(&json!({ "bench": v, "sm_lid": c.local().sm_lid }));
            Ok(())
        }
    }
}
