//! Test support for the tests that drive the real InfiniBand simulator (dev-dependency only).
//!
//! One place for what the `umad` tests of `fabric-umad` and `fabricd` share:
//!
//! * [`Ibsim`]: a private `ibsim` (Debian `ibsim-utils`) on a net file, with a socket name
//!   unique per process and call (tests of one binary run in parallel), its console on a pipe
//!   held open ([`Ibsim::console`], [`Ibsim::console_output`], [`Ibsim::route`]), killed on drop;
//! * the infiniband-diags tools (`ibroute`, `ibtracert`, `smpquery`, `sminfo`, ...) run under
//!   the umad2sim preload shim ([`SHIM`]) on a chosen simulated node, with a deadline
//!   ([`Ibsim::tool`], [`Ibsim::tool_on`]), and any other program put on the simulator
//!   ([`Ibsim::command`], [`Ibsim::env`]);
//! * parsers of what those tools print ([`parse_ibroute`], [`parse_ibtracert`],
//!   [`parse_route`]) and of ibsim node ids ([`node_guid`]);
//! * error injection and counters: [`Ibsim::set_error_rate`], [`Ibsim::set_port_counter`],
//!   [`Ibsim::perfquery`] ([`parse_perfquery`]);
//! * [`TempDir`], a private directory removed on drop, and [`find_tool`];
//! * [`tables`]: parsers of `ibroute -M`, `smpquery pkeys` and `smpquery portinfo` fields;
//! * [`saquery`]: `saquery` run under the shim and its records read into field maps, and
//!   OpenSM started as master subnet manager and SA ([`saquery::OpenSm`]).
//!
//! Everything here is test support: a missing tool, a simulator that does not come up or a
//! tool that prints something unexpected panics with a message saying what was read. A missing
//! tool fails the test (CI installs `ibsim-utils` and `infiniband-diags`); it is not skipped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub mod saquery;
pub mod tables;

pub use tables::{parse_ibroute_mcast, parse_smpquery_fields, parse_smpquery_pkeys};

/// The umad2sim preload library (Debian `ibsim-utils`): with `LD_PRELOAD` set to it, a program
/// using libibumad talks to the simulator named by `IBSIM_SOCKNAME` as node `SIM_HOST`.
pub const SHIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// ibsim's example net `net.2sw2path4hca` (2 switches, 2 paths, 4 HCAs; not a fat tree), with
/// its source noted at the top of `data/net.2sw2path4hca`. Attach clients to node `Hca1`.
pub const NET_2SW2PATH4HCA: &str = include_str!("../data/net.2sw2path4hca");

/// What ibsim prints once the net is loaded and clients may attach.
const READY_LINE: &str = "Network simulator ready.";
/// How long [`Ibsim::start`] waits for [`READY_LINE`].
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long [`Ibsim::tool`] lets a diagnostic tool run.
const TOOL_WITHIN: Duration = Duration::from_secs(20);
/// How long [`Ibsim::console_output`] waits for the final line of a console command.
const CONSOLE_WITHIN: Duration = Duration::from_secs(5);

/// One counter for every name this process makes unique (socket names, directories, outputs).
fn unique() -> usize {
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The path of an installed tool, looked up in the system directories (the diagnostic tools
/// live in `/usr/sbin`, which is not always on a test's `PATH`).
///
/// # Panics
/// When the tool is not installed, with the packages to install.
pub fn find_tool(name: &str) -> PathBuf {
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(d).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` is not installed (apt-get install ibsim-utils infiniband-diags; CI installs them)");
}

/// A private directory under the system temp dir, removed (with its contents) on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `<tmp>/ibsim-harness-<tag>-<pid>-<n>`, empty.
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("ibsim-harness-{tag}-{}-{}", std::process::id(), unique()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        TempDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits for `child` at most `within`; kills it and panics (naming `what`) past the deadline.
pub fn wait_with_deadline(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return s,
            Ok(None) => {}
            Err(e) => panic!("waiting for {what}: {e}"),
        }
        if t0.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A running `ibsim` with its console; killed on drop (the console pipe is closed first).
///
/// Its working directory holds the net file (`fabric.net`), its log (`ibsim.log`: stdout and
/// stderr, where console commands print), and is the working directory of every tool run on it
/// (the shim emulates sysfs under `./sys-<pid>/` there).
#[derive(Debug)]
pub struct Ibsim {
    child: Child,
    console: Option<ChildStdin>,
    sock: String,
    host: String,
    dir: PathBuf,
    log: PathBuf,
    /// The directory when the simulator owns it ([`Ibsim::start_temp`]); dropped after the
    /// process is killed.
    _temp: Option<TempDir>,
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        drop(self.console.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ibsim {
    /// Starts ibsim on `net_text` (written to `dir/fabric.net`); clients attach to node `host`
    /// (an ibsim node id such as `H-0002c98000000500` or a net-file name such as `Hca1`).
    /// Returns once the simulator printed that it is ready (30 s deadline).
    ///
    /// # Panics
    /// When ibsim is missing, exits, or is not ready in time (with its output).
    pub fn start(dir: &Path, net_text: &str, host: String) -> Ibsim {
        Self::start_inner(dir.to_path_buf(), None, net_text, host, Self::new_sock_name())
    }

    /// A socket name (`IBSIM_SOCKNAME`) unique to this process and call, for a simulator
    /// started later with [`Ibsim::start_on_sock`] (clients started before it wait for it).
    pub fn new_sock_name() -> String {
        format!("fibsim-{}-{}", std::process::id(), unique())
    }

    /// Like [`Ibsim::start`], on socket name `sock` (from [`Ibsim::new_sock_name`]).
    pub fn start_on_sock(dir: &Path, net_text: &str, host: String, sock: String) -> Ibsim {
        Self::start_inner(dir.to_path_buf(), None, net_text, host, sock)
    }

    /// Like [`Ibsim::start`], in a fresh [`TempDir`] named after `tag` that goes away with the
    /// simulator.
    pub fn start_temp(tag: &str, net_text: &str, host: String) -> Ibsim {
        let temp = TempDir::new(tag);
        Self::start_inner(
            temp.path().to_path_buf(),
            Some(temp),
            net_text,
            host,
            Self::new_sock_name(),
        )
    }

    fn start_inner(dir: PathBuf, temp: Option<TempDir>, net_text: &str, host: String, sock: String) -> Ibsim {
        let net = dir.join("fabric.net");
        std::fs::write(&net, net_text).unwrap_or_else(|e| panic!("write {}: {e}", net.display()));
        let log_path = dir.join("ibsim.log");
        let log = std::fs::File::create(&log_path).unwrap_or_else(|e| panic!("create {}: {e}", log_path.display()));
        let log_err = log.try_clone().expect("duplicate the ibsim log handle");
        let mut child = Command::new(find_tool("ibsim"))
            .arg("-s")
            .arg(&net)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("start ibsim: {e}"));
        let console = child.stdin.take();
        let mut sim = Ibsim {
            child,
            console,
            sock,
            host,
            dir,
            log: log_path,
            _temp: temp,
        };
        let t0 = Instant::now();
        loop {
            let out = std::fs::read_to_string(&sim.log).unwrap_or_default();
            if out.contains(READY_LINE) {
                return sim;
            }
            if let Ok(Some(s)) = sim.child.try_wait() {
                panic!("ibsim exited ({s}):\n{out}");
            }
            assert!(
                t0.elapsed() < READY_WITHIN,
                "ibsim not ready within {READY_WITHIN:?}:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The simulator's process id (to stop and continue it: a simulator that stops answering).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The simulator's socket name (`IBSIM_SOCKNAME`).
    pub fn sock(&self) -> &str {
        &self.sock
    }

    /// The node clients attach to by default (`SIM_HOST`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The simulator's working directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What ibsim printed while it parsed the net file and started, up to and including its
    /// "Network simulator ready." line (the log holds later console output too). Tests check it
    /// for ibsim's complaints about a net file (`can't ...`, `bad ...`, `ibwarn`).
    ///
    /// # Panics
    /// When the log cannot be read.
    pub fn startup_log(&self) -> String {
        let all = std::fs::read_to_string(&self.log).unwrap_or_else(|e| panic!("read {}: {e}", self.log.display()));
        let end = all.find(READY_LINE).map_or(all.len(), |i| i + READY_LINE.len());
        all[..end].to_string()
    }

    /// Sends one console command (e.g. `Unlink "S-0002c90000000000"[3]`, `Error ... 10`).
    pub fn console(&mut self, cmd: &str) {
        let c = self
            .console
            .as_mut()
            .expect("the ibsim console is open while the simulator runs");
        writeln!(c, "{cmd}").unwrap_or_else(|e| panic!("write ibsim console {cmd:?}: {e}"));
        c.flush().unwrap_or_else(|e| panic!("flush ibsim console {cmd:?}: {e}"));
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(&self.log).map(|m| m.len() as usize).unwrap_or(0)
    }

    /// Sends a console command and returns what ibsim printed after it, once a line satisfying
    /// `done` appeared (5 s deadline).
    ///
    /// # Panics
    /// When no such line appears in time (with what was printed).
    pub fn console_output(&mut self, cmd: &str, done: impl Fn(&str) -> bool) -> String {
        let from = self.log_len();
        self.console(cmd);
        let t0 = Instant::now();
        loop {
            let all = std::fs::read(&self.log).unwrap_or_default();
            let text = String::from_utf8_lossy(&all[from.min(all.len())..]).to_string();
            if text.lines().any(&done) {
                return text;
            }
            assert!(
                t0.elapsed() < CONSOLE_WITHIN,
                "ibsim console {cmd:?} printed no final line:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The console `Route <from> <to>` walk between two LIDs, as [`parse_route`] returns it;
    /// `Err` with ibsim's message when the walk fails (bad LID, no route, unconfigured port).
    ///
    /// # Panics
    /// When ibsim prints a hop line that does not parse (with the text).
    pub fn route(&mut self, from: u32, to: u32) -> Result<Vec<(String, u32, u32)>, String> {
        let text = self.console_output(&format!("Route {from} {to}"), |l| {
            l.contains("To node") || l.contains("Bad ") || l.contains("no route") || l.contains("unconfigured")
        });
        if !text.contains("To node") {
            return Err(text);
        }
        Ok(parse_route(&text).unwrap_or_else(|e| panic!("ibsim Route {from} {to}: {e}:\n{text}")))
    }

    /// Sends console `commands` (one per line) and waits until ibsim has run them (a comment
    /// line after them comes back); returns what they printed.
    ///
    /// # Panics
    /// When ibsim reports a problem with one of them (a `# ...` line: unknown node, bad port,
    /// bad value).
    pub fn console_checked(&mut self, commands: &str) -> String {
        let marker = format!("# fabric-harness-done-{}", unique());
        let text = self.console_output(&format!("{commands}\n{marker}"), |l| l.contains(&marker));
        let complaints: Vec<&str> = text
            .lines()
            .map(|l| l.trim_start_matches("sim> ").trim())
            .filter(|l| l.starts_with('#') && !l.contains(&marker))
            .collect();
        assert!(complaints.is_empty(), "ibsim refused {commands:?}: {complaints:?}");
        text
    }

    /// Console `Error "node"[port] rate`: from now on ibsim drops `rate` % of the packets that
    /// enter that port (and counts each in the port's PortRcvErrors); 0 stops it.
    pub fn set_error_rate(&mut self, node: &str, port: u8, rate: u8) {
        self.console_checked(&format!("Error \"{node}\"[{port}] {rate}"));
    }

    /// Console `PerformanceSet "node"[port] PortCounters.<field>=<value>`: sets one counter of
    /// the port's PMA (`field` as `perfquery` names it: `SymbolErrorCounter`,
    /// `LinkDownedCounter`, ...); ibsim saturates the value at the field's width.
    pub fn set_port_counter(&mut self, node: &str, port: u8, field: &str, value: u64) {
        let text = self.console_checked(&format!(
            "PerformanceSet \"{node}\"[{port}] PortCounters.{field}={value}"
        ));
        assert!(
            text.contains("has been set to"),
            "PerformanceSet {node}[{port}] {field}: {text}"
        );
    }

    /// `perfquery [-x] <lid> <port>` run on node `host` of this simulator: the counters it
    /// prints, by its names (`PortRcvErrors`, `PortXmitData`, ...).
    ///
    /// # Panics
    /// When perfquery fails or prints no counter (with its output).
    pub fn perfquery(&self, host: &str, lid: u16, port: u8, extended: bool) -> BTreeMap<String, u64> {
        let (l, p) = (lid.to_string(), port.to_string());
        let mut args = vec![l.as_str(), p.as_str()];
        if extended {
            args.insert(0, "-x");
        }
        let (ok, text) = self.tool_on(host, "perfquery", &args);
        let got = parse_perfquery(&text);
        assert!(ok && !got.is_empty(), "perfquery {args:?} on {host} failed:\n{text}");
        got
    }

    /// The environment that puts a process on this simulator as node [`Ibsim::host`].
    pub fn env(&self) -> [(&str, &str); 3] {
        [
            ("IBSIM_SOCKNAME", self.sock.as_str()),
            ("SIM_HOST", self.host.as_str()),
            ("LD_PRELOAD", SHIM),
        ]
    }

    /// A command for `prog` on this simulator: [`Ibsim::env`] set, the simulator's directory as
    /// working directory, stdin closed. The caller sets arguments and output.
    pub fn command(&self, prog: &Path) -> Command {
        let mut c = Command::new(prog);
        c.envs(self.env()).current_dir(&self.dir).stdin(Stdio::null());
        c
    }

    /// Runs a diagnostic tool under the shim on node [`Ibsim::host`] with a 20 s deadline;
    /// returns (success, stdout and stderr).
    pub fn tool(&self, name: &str, args: &[&str]) -> (bool, String) {
        self.tool_on(&self.host, name, args)
    }

    /// Like [`Ibsim::tool`], with the tool attached to node `host` (an ibsim node id such as
    /// `H-0002c98000000500`) instead of the default one.
    ///
    /// # Panics
    /// When the tool is missing, cannot start, or runs past the deadline.
    pub fn tool_on(&self, host: &str, name: &str, args: &[&str]) -> (bool, String) {
        let out = self.dir.join(format!("{name}-{}.out", unique()));
        let f = std::fs::File::create(&out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
        let f_err = f.try_clone().expect("duplicate the tool output handle");
        let mut child = self
            .command(&find_tool(name))
            .args(args)
            .env("SIM_HOST", host)
            .stdout(f)
            .stderr(f_err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let ok = wait_with_deadline(&mut child, TOOL_WITHIN, &format!("{name} {args:?}")).success();
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        (ok, text)
    }
}

/// The `Name:.....value` lines `perfquery` prints, as name -> value (decimal or `0x` hex);
/// other lines are skipped.
pub fn parse_perfquery(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let Some((name, value)) = l.split_once(':') else {
            continue;
        };
        let value = value.trim_start_matches('.').trim();
        let v = match value.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => value.parse().ok(),
        };
        if let (Some(v), false) = (v, name.contains(' ')) {
            out.insert(name.to_string(), v);
        }
    }
    out
}

/// Node GUID in an ibsim node id (`S-0002c90000000000`, `H-...`), if it is one of ours (the
/// net files written by `fabric_topology::ibnet::write` name nodes that way).
pub fn node_guid(id: &str) -> Option<u64> {
    let h = id.strip_prefix("S-").or_else(|| id.strip_prefix("H-"))?;
    u64::from_str_radix(h, 16).ok()
}

/// The entries `ibroute` prints (`0x<LID> <port> : ...` lines), as LID -> port. Other lines
/// (headers, the summary) are skipped.
pub fn parse_ibroute(text: &str) -> BTreeMap<u64, u64> {
    let mut shown = BTreeMap::new();
    for l in text.lines() {
        let mut w = l.split_whitespace();
        let (Some(a), Some(b)) = (w.next(), w.next()) else {
            continue;
        };
        if let (Some(a), Ok(p)) = (a.strip_prefix("0x"), b.parse::<u64>()) {
            if let Ok(l) = u64::from_str_radix(a, 16) {
                shown.insert(l, p);
            }
        }
    }
    shown
}

/// `ibroute <args>` (`<lid>`, `-n <lid>`, `-D <path>`) run on `sim`, as LID -> port.
///
/// # Panics
/// When `ibroute` fails (with its output).
pub fn ibroute(sim: &Ibsim, args: &[&str]) -> BTreeMap<u64, u64> {
    let (ok, text) = sim.tool("ibroute", args);
    assert!(ok, "ibroute {args:?} failed:\n{text}");
    parse_ibroute(&text)
}

/// A switch on a traced path: (node GUID, in port, out port).
pub type SwitchHop = (u64, u32, u32);

/// Parses a number of a tool's line, saying what was read when it is not one.
fn number<T: std::str::FromStr>(what: &str, s: &str, line: &str) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{what} {s:?} is not a number in line {line:?}"))
}

/// What `ibtracert <src> <dst>` prints, as [`SwitchHop`]s (node GUID, in port, out port) and the
/// node GUID the trace ends at.
///
/// Hop lines read `[out] -> switch port {0x<guid>}[in] ...` or `[out] -> ca port {0x<port
/// guid>}[in] ...`; the out port of a line belongs to the node of the previous line. The
/// destination is the GUID of the last `To ...{0x<guid>}` line.
pub fn parse_ibtracert(text: &str) -> Result<(Vec<SwitchHop>, u64), String> {
    let mut lines: Vec<(u32, bool, u64, u32)> = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.trim().strip_prefix('[') else {
            continue;
        };
        let Some((out, rest)) = rest.split_once("] -> ") else {
            continue;
        };
        let is_switch = rest.starts_with("switch");
        let Some((_, rest)) = rest.split_once("{0x") else {
            continue;
        };
        let Some((guid, rest)) = rest.split_once("}[") else {
            continue;
        };
        let Some((inp, _)) = rest.split_once(']') else { continue };
        let guid = u64::from_str_radix(guid, 16).map_err(|_| format!("GUID {guid:?} is not hex in line {l:?}"))?;
        lines.push((number("out port", out, l)?, is_switch, guid, number("in port", inp, l)?));
    }
    let hops = lines
        .windows(2)
        .filter(|w| w[0].1)
        .map(|w| (w[0].2, w[0].3, w[1].0))
        .collect();
    let end = text
        .lines()
        .rfind(|l| l.starts_with("To "))
        .and_then(|l| l.split_once("{0x"))
        .and_then(|(_, r)| r.split_once('}'))
        .and_then(|(g, _)| u64::from_str_radix(g, 16).ok())
        .ok_or_else(|| "no destination line (`To ... {0x<guid>}`)".to_string())?;
    Ok((hops, end))
}

/// `ibtracert <src> <dst>` between two LIDs run on `sim`, as [`parse_ibtracert`] returns it.
///
/// # Panics
/// When `ibtracert` fails or its output does not parse (with the output).
pub fn ibtracert(sim: &Ibsim, src: u32, dst: u32) -> (Vec<SwitchHop>, u64) {
    let (ok, text) = sim.tool("ibtracert", &[&src.to_string(), &dst.to_string()]);
    assert!(ok, "ibtracert {src} {dst} failed:\n{text}");
    parse_ibtracert(&text).unwrap_or_else(|e| panic!("ibtracert {src} {dst}: {e}:\n{text}"))
}

/// The hop lines of an ibsim console `Route` walk (`[out] -> "node"[in]`, possibly after a
/// `sim> ` prompt), as (ibsim node id, in port, out port of the previous node). Other lines
/// are skipped.
pub fn parse_route(text: &str) -> Result<Vec<(String, u32, u32)>, String> {
    let mut hops = Vec::new();
    for l in text.lines() {
        let l = l.trim_start_matches("sim> ").trim();
        let Some(rest) = l.strip_prefix('[') else { continue };
        let Some((out, rest)) = rest.split_once("] -> \"") else {
            continue;
        };
        let Some((node, rest)) = rest.split_once("\"[") else {
            continue;
        };
        let Some(inp) = rest.strip_suffix(']') else { continue };
        hops.push((
            node.to_string(),
            number("in port", inp, l)?,
            number("out port", out, l)?,
        ));
    }
    Ok(hops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfquery_lines_are_read_by_name() {
        let text = "# Port counters: Lid 1 port 3 (CapMask: 0x1300)\n\
                    PortSelect:......................3\n\
                    CounterSelect:...................0x0100\n\
                    PortRcvErrors:...................10\n\
                    PortXmitData:....................5328\n";
        let got = parse_perfquery(text);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!((got["PortSelect"], got["CounterSelect"]), (3, 0x100));
        assert_eq!((got["PortRcvErrors"], got["PortXmitData"]), (10, 5328));
    }

    #[test]
    fn node_ids_of_generated_nets_carry_the_guid() {
        assert_eq!(node_guid("S-0002c90000000010"), Some(0x0002_c900_0000_0010));
        assert_eq!(node_guid("H-0002c98000000500"), Some(0x0002_c980_0000_0500));
        assert_eq!(node_guid("Hca1"), None);
        assert_eq!(node_guid("S-zz"), None);
    }

    #[test]
    fn ibroute_entries_are_read_and_headers_skipped() {
        let text = "Unicast lids [0x0-0x8] of switch DR path slid 0; dlid 0; 0,1 guid 0x0002c90000000010 (sw):\n\
                    \x20 Lid  Out   Destination\n\
                    \x20      Port     Info \n\
                    0x0001 001 : (Channel Adapter portguid 0x0002c98000000501: 'h1')\n\
                    0x0004 000 : (Switch portguid 0x0002c90000000010: 'sw')\n\
                    0x000a 012 : (Channel Adapter portguid 0x0002c98000000503: 'h2')\n\
                    3 valid lids dumped \n";
        let got = parse_ibroute(text);
        let want: BTreeMap<u64, u64> = [(1, 1), (4, 0), (10, 12)].into_iter().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn ibtracert_hops_pair_in_ports_with_the_next_out_port() {
        let text = "From ca {0x0002c98000000501} portnum 1 lid 1-1 \"h1\"\n\
                    [1] -> switch port {0x0002c90000000010}[3] lid 4-4 \"leaf\"\n\
                    [7] -> switch port {0x0002c90000000020}[2] lid 5-5 \"spine\"\n\
                    [4] -> ca port {0x0002c98000000503}[1] lid 10-10 \"h2\"\n\
                    To ca {0x0002c98000000502} portnum 1 lid 10-10 \"h2\"\n";
        let (hops, end) = parse_ibtracert(text).expect("parses");
        assert_eq!(hops, vec![(0x0002_c900_0000_0010, 3, 7), (0x0002_c900_0000_0020, 2, 4)]);
        assert_eq!(end, 0x0002_c980_0000_0502);
    }

    #[test]
    fn ibtracert_without_destination_or_with_a_bad_port_is_an_error() {
        assert!(parse_ibtracert("[1] -> switch port {0x10}[3] lid 4-4\n").is_err());
        let e = parse_ibtracert("[x] -> switch port {0x10}[3]\nTo ca {0x2} portnum 1\n").unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
    }

    #[test]
    fn console_route_hops_after_the_prompt() {
        let text = "sim> From node \"Hca1\" port 1 lid 1\n\
                    [1] -> \"Sw1\"[2]\n\
                    [5] -> \"S-0002c90000000020\"[3]\n\
                    [4] -> \"Hca3\"[1]\n\
                    To node \"Hca3\" port 1 lid 3\n";
        let hops = parse_route(text).expect("parses");
        assert_eq!(
            hops,
            vec![
                ("Sw1".to_string(), 2, 1),
                ("S-0002c90000000020".to_string(), 3, 5),
                ("Hca3".to_string(), 1, 4)
            ]
        );
        assert!(parse_route("[1] -> \"Sw1\"[two]\n").is_err());
    }
}
