//! Subnet Administration under the simulator: `saquery` (infiniband-diags) run under the
//! umad2sim shim and its output read into field maps ([`parse_saquery`]), and OpenSM started as
//! the master subnet manager on a simulated node ([`OpenSm`]), the baseline fabricd's SA answers
//! are compared with.
//!
//! What `saquery` shows under the shim (measured with OpenSM 3.3.23, see
//! `docs/subnet-administration.md`, "Acceptance and OpenSM comparison"): every query is a
//! GetTable; the shim has no RMPP, so an answer longer than one MAD arrives as its first
//! segment only, and `saquery` counts the records of a table as `(MAD length - 56) /
//! (AttributeOffset * 8)`: a full segment shows `200 / record size` records, of which only
//! those within the first [`SHIM_VALID_BYTES`] bytes hold what the SA sent; the others are
//! garbage. [`SaqueryRun::real_records`] keeps the real ones.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{find_tool, wait_with_deadline, Ibsim};

/// In a first segment that arrives alone under the shim (an answer longer than one MAD), the
/// bytes of the 200-byte data area that hold records as `saquery` shows them; past them it
/// prints garbage (measured against OpenSM 3.3.23: the 22nd of 25 LinkRecords, bytes 168..176,
/// is all zeros; the 8th of 8 SwitchInfoRecords and the 3rd of 3 PathRecords are garbage). The
/// project's client `fabric-saquery` reads 176 valid bytes (the shim delivers 232 bytes of a
/// MAD); `saquery`, through libibumad, shows 8 fewer.
pub const SHIM_VALID_BYTES: usize = 168;
/// The data area of one SA MAD (256 - 56 header bytes).
pub const SA_DATA_BYTES: usize = 200;

/// The size of a record in a table answer (AttributeOffset × 8) by the kind `saquery` prints,
/// `None` for a kind not listed (IBA vol. 1 table 207: NodeRecord 108 bytes, PortInfoRecord
/// 68, SwitchInfoRecord 21, LinkRecord 8, LFTRecord 68, GUIDInfoRecord 68, SMInfoRecord 28,
/// PathRecord 64, MCMemberRecord 52, ServiceRecord 176, InformInfoRecord 60; each rounded
/// up to 8).
pub fn record_size(kind: &str) -> Option<usize> {
    let size: usize = match kind {
        "NodeRecord" => 108,
        "PortInfoRecord" => 68,
        "SwitchInfoRecord" => 21,
        "LinkRecord" => 8,
        "LFT Record" => 68,
        "GUIDInfo Record" => 68,
        "SMInfoRecord" => 28,
        "PathRecord" => 64,
        k if k.starts_with("MCMemberRecord") => 52,
        k if k.starts_with("ServiceRecord") => 176,
        k if k.starts_with("InformInfoRecord") => 60,
        _ => return None,
    };
    Some(size.div_ceil(8) * 8)
}

/// One record `saquery` printed: its kind (the header without ` dump:`, e.g. `NodeRecord`,
/// `PortInfoRecord`, `LFT Record`, `SA ClassPortInfo`) and its fields by name as printed
/// (`node_guid`, `LinkWidthActive`, `GUID 0`, ...), values as printed. Capability flags
/// printed under a field on lines of their own are joined with `,` under `<field>.flags`;
/// the entries of an LFT block are `lft[<LID>]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaqueryRecord {
    pub kind: String,
    pub fields: BTreeMap<String, String>,
}

impl SaqueryRecord {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// Field `name` as a number (`0x` hexadecimal or decimal).
    pub fn num(&self, name: &str) -> Result<u64, String> {
        let v = self
            .get(name)
            .ok_or_else(|| format!("{}: no field {name:?} in {:?}", self.kind, self.fields))?;
        parse_number(v).ok_or_else(|| format!("{}: field {name} = {v:?} is not a number", self.kind))
    }

    /// Field `name` as a number; panics naming the record when it is missing or not a number.
    pub fn n(&self, name: &str) -> u64 {
        self.num(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Whether this is padding past the real records of a full first segment (its key is
    /// zero: a PathRecord without SLID and DLID, a NodeRecord without NodeGUID, a LinkRecord,
    /// PortInfoRecord, SwitchInfoRecord, LFT or GUIDInfo record without LID). Other kinds are
    /// never padding.
    pub fn is_padding(&self) -> bool {
        let zero = |f: &str| self.num(f).is_ok_and(|v| v == 0);
        match self.kind.as_str() {
            "PathRecord" => zero("slid") && zero("dlid"),
            "NodeRecord" => zero("node_guid"),
            "LinkRecord" => zero("FromLID"),
            "PortInfoRecord" => zero("EndPortLid"),
            "SwitchInfoRecord" | "LFT Record" | "GUIDInfo Record" => zero("LID"),
            _ => false,
        }
    }
}

/// A number as `saquery` prints it: `0x` hexadecimal or decimal.
pub fn parse_number(v: &str) -> Option<u64> {
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The GID of a port in the form `saquery` prints and `--sgid-to-dgid` takes
/// (`fe80::2:c980:0:1`).
pub fn gid(prefix: u64, port_guid: u64) -> String {
    Ipv6Addr::from((u128::from(prefix) << 64) | u128::from(port_guid)).to_string()
}

/// Reads what `saquery` printed into records. A record starts at a header line in column 0
/// ending with `:` (`NodeRecord dump:`); fields are `name....value` lines (`name:....value` in
/// PortInfo dumps); indented lines ending with `:` and `RID` are sub-headers; `<LID>\t<port>`
/// lines are LFT entries; a lone word under a field is one of its flags.
///
/// An error names the line (1-based) and its text: a field before any header, or a line of
/// `saquery`'s diagnostics (`ibwarn`, `ibpanic`, `ibdebug`, `iberror`, `ERROR: Query result
/// returned 0x...` for an error status, `Query SA failed`).
pub fn parse_saquery(text: &str) -> Result<Vec<SaqueryRecord>, String> {
    let mut out: Vec<SaqueryRecord> = Vec::new();
    let mut last_field: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {raw:?}", i + 1);
        if raw.trim().is_empty() {
            continue;
        }
        if ["ibwarn", "ibpanic", "ibdebug", "iberror", "ERROR:", "Query SA failed"]
            .iter()
            .any(|p| raw.starts_with(p))
        {
            return Err(at("a diagnostic of saquery, not a record"));
        }
        let indented = raw.starts_with(char::is_whitespace);
        let line = raw.trim();
        if !indented && line.ends_with(':') && !line.contains("..") {
            let kind = line.trim_end_matches(':').trim_end_matches(" dump").trim().to_string();
            out.push(SaqueryRecord {
                kind,
                fields: BTreeMap::new(),
            });
            last_field = None;
            continue;
        }
        let Some(rec) = out.last_mut() else {
            return Err(at("a line before any record header"));
        };
        if let Some(dots) = line.find("..") {
            let name = line[..dots].trim().trim_end_matches(':').trim().to_string();
            let value = line[dots..].trim_start_matches('.').trim().to_string();
            if name.is_empty() {
                return Err(at("a field without a name"));
            }
            rec.fields.insert(name.clone(), value);
            last_field = Some(name);
            continue;
        }
        if line.ends_with(':') || line == "RID" || line.starts_with("LID\tPort") || line == "LID Port Number" {
            // Sub-headers (`PortInfo dump:`, `SwitchInfo dump:`, `LFT:`, `RID`, the LFT's
            // column header).
            continue;
        }
        let mut words = line.split_whitespace();
        if let (Some(a), Some(b), None) = (words.next(), words.next(), words.next()) {
            if let (Ok(lid), Ok(port)) = (a.parse::<u32>(), b.parse::<u32>()) {
                rec.fields.insert(format!("lft[{lid}]"), port.to_string());
                continue;
            }
        }
        match &last_field {
            Some(f) if !line.contains(char::is_whitespace) => {
                let e = rec.fields.entry(format!("{f}.flags")).or_default();
                if !e.is_empty() {
                    e.push(',');
                }
                e.push_str(line);
            }
            _ => return Err(at("neither a field, a sub-header, an LFT entry nor a flag")),
        }
    }
    Ok(out)
}

/// [`SaqueryRun::real_records`] on parsed records.
pub fn real_records(mut records: Vec<SaqueryRecord>) -> Vec<SaqueryRecord> {
    if let Some(size) = records.first().and_then(|r| record_size(&r.kind)) {
        // One record in a MAD (a ServiceRecord) is kept: its key fields come first.
        if records.len() > 1 && records.len() == SA_DATA_BYTES / size {
            records.truncate(SHIM_VALID_BYTES / size);
        }
    }
    records.retain(|r| !r.is_padding());
    records
}

/// One `saquery` run: whether it exited 0, what it printed (stdout and stderr), how long it
/// took (process start to exit, the shim's start-up included).
#[derive(Clone, Debug)]
pub struct SaqueryRun {
    pub args: Vec<String>,
    pub ok: bool,
    pub text: String,
    pub elapsed: Duration,
}

impl SaqueryRun {
    /// The records printed, padding included.
    ///
    /// # Panics
    /// When `saquery` failed or its output does not parse (with the output).
    pub fn records(&self) -> Vec<SaqueryRecord> {
        assert!(self.ok, "saquery {:?} failed:\n{}", self.args, self.text);
        parse_saquery(&self.text).unwrap_or_else(|e| panic!("saquery {:?}: {e}\n{}", self.args, self.text))
    }

    /// The records the SA really sent: when `saquery` shows a full first segment of several
    /// records (`200 / record size` of them), only those within its first [`SHIM_VALID_BYTES`]
    /// bytes; then without padding ([`SaqueryRecord::is_padding`]). A lone record is kept
    /// whole (a 176-byte ServiceRecord: its last 8 bytes, ServiceData, may be garbage).
    pub fn real_records(&self) -> Vec<SaqueryRecord> {
        real_records(self.records())
    }
}

/// Runs `saquery <args>` under the shim on node `host` of `sim` (20 s deadline).
pub fn saquery(sim: &Ibsim, host: &str, args: &[&str]) -> SaqueryRun {
    let t0 = Instant::now();
    let (ok, text) = sim.tool_on(host, "saquery", args);
    SaqueryRun {
        args: args.iter().map(ToString::to_string).collect(),
        ok,
        text,
        elapsed: t0.elapsed(),
    }
}

/// The version line `opensm --version` prints (`OpenSM 3.3.23`).
///
/// # Panics
/// When OpenSM is not installed or prints no version.
pub fn opensm_version() -> String {
    let out = Command::new(find_tool("opensm"))
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run opensm --version: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .map(str::trim)
        .find(|l| l.starts_with("OpenSM "))
        .unwrap_or_else(|| panic!("opensm --version printed no `OpenSM <version>` line:\n{text}"))
        .to_string()
}

/// A running OpenSM, master subnet manager (and SA) of a simulated fabric, attached to one node
/// under the shim, with a private configuration, log and cache directory; killed on drop.
#[derive(Debug)]
pub struct OpenSm {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
    stdout: PathBuf,
}

impl Drop for OpenSm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl OpenSm {
    /// Starts `opensm -F <conf>` on node `host` of `sim`, in `dir/opensm-<n>/`: the default
    /// configuration (`opensm -c`) with its log, dump and cache files in that directory,
    /// `sm_priority 15`, `sweep_interval 1`, and the `key value` lines of `settings` (each
    /// must be a key of the default configuration).
    ///
    /// # Panics
    /// When OpenSM is missing, `opensm -c` fails, or a key of `settings` is unknown.
    pub fn start(sim: &Ibsim, dir: &Path, host: &str, settings: &[(&str, &str)]) -> OpenSm {
        let osm = dir.join(format!("opensm-{}", crate::unique()));
        std::fs::create_dir_all(&osm).unwrap_or_else(|e| panic!("create {}: {e}", osm.display()));
        let conf = osm.join("opensm.conf");
        let mut gen = Command::new(find_tool("opensm"))
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("run opensm -c: {e}"));
        wait_with_deadline(&mut gen, Duration::from_secs(10), "opensm -c");
        let mut text = std::fs::read_to_string(&conf).unwrap_or_else(|e| panic!("opensm -c wrote no config: {e}"));
        let log = osm.join("opensm.log");
        let defaults = [
            ("log_file", log.display().to_string()),
            ("accum_log_file", "FALSE".to_string()),
            ("force_log_flush", "TRUE".to_string()),
            ("dump_files_dir", format!("{}/", osm.display())),
            ("sm_priority", "15".to_string()),
            ("sweep_interval", "1".to_string()),
        ];
        for (key, value) in defaults
            .into_iter()
            .chain(settings.iter().map(|&(k, v)| (k, v.to_string())))
        {
            let mut found = false;
            text = text
                .lines()
                .map(|l| {
                    if l.split_whitespace().next() == Some(key) {
                        found = true;
                        format!("{key} {value}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            assert!(found, "no `{key}` line in the configuration opensm -c wrote");
        }
        std::fs::write(&conf, text + "\n").unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
        let stdout = osm.join("stdout");
        let out = std::fs::File::create(&stdout).unwrap_or_else(|e| panic!("create {}: {e}", stdout.display()));
        let err = out.try_clone().expect("duplicate the opensm output handle");
        let child = sim
            .command(&find_tool("opensm"))
            .arg("-F")
            .arg(&conf)
            .current_dir(&osm)
            .env("SIM_HOST", host)
            .env("OSM_CACHE_DIR", &osm)
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start opensm: {e}"));
        OpenSm {
            child,
            dir: osm,
            log,
            stdout,
        }
    }

    /// OpenSM's directory (configuration, log, dump files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its log and what it printed.
    pub fn log_text(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let out = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        format!("{log}\n--- stdout ---\n{out}")
    }

    /// How many log lines contain `pat`.
    pub fn count_in_log(&self, pat: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(pat))
            .count()
    }

    /// Waits until the log has more than `already` lines containing `pat`.
    ///
    /// # Panics
    /// When OpenSM exits or the deadline passes first (with its log).
    pub fn wait_for_count(&mut self, pat: &str, already: usize, within: Duration) {
        let t0 = Instant::now();
        loop {
            if self.count_in_log(pat) > already {
                return;
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("opensm exited ({s}) before {pat:?}:\n{}", self.log_text());
            }
            assert!(
                t0.elapsed() < within,
                "no new {pat:?} from opensm within {within:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the first `SUBNET UP` (every switch programmed, the SA answering).
    pub fn wait_subnet_up(&mut self, within: Duration) {
        self.wait_for_count("SUBNET UP", 0, within);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_hex_or_decimal() {
        assert_eq!(parse_number("0x0002c98000000001"), Some(0x0002_c980_0000_0001));
        assert_eq!(parse_number(" 24"), Some(24));
        assert_eq!(parse_number("Switch"), None);
    }

    #[test]
    fn gids_print_like_saquery() {
        assert_eq!(gid(0xfe80_0000_0000_0000, 0x0002_c980_0000_0001), "fe80::2:c980:0:1");
        assert_eq!(gid(0xfe80_0000_0000_0000, 0x0002_c980_0000_0301), "fe80::2:c980:0:301");
    }

    #[test]
    fn a_line_before_any_header_or_a_diagnostic_is_an_error() {
        let e = parse_saquery("\t\tlid.....4\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_saquery("NodeRecord dump:\nibwarn: [1] umad_recv: timeout\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("ibwarn"), "{e}");
        let e = parse_saquery("NodeRecord dump:\n\t\tthis is not a field\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn flags_are_joined_under_their_field_and_values_keep_their_dots() {
        let text = "PortInfoRecord dump:\n\tRID\n\t\tEndPortLid..............2\n\tPortInfo dump:\n\
                    \t\tCapMask:.........................0x50c04a\n\t\t\t\tIsSM\n\t\t\t\tIsTrapSupported\n\
                    \t\tLid:.............................2\n\
                    NodeRecord dump:\n\t\tNodeDescription.........a.b c\n";
        let r = parse_saquery(text).expect("parses");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].kind, "PortInfoRecord");
        assert_eq!(r[0].get("CapMask"), Some("0x50c04a"));
        assert_eq!(r[0].get("CapMask.flags"), Some("IsSM,IsTrapSupported"));
        assert_eq!(r[0].n("Lid"), 2);
        assert_eq!(r[1].get("NodeDescription"), Some("a.b c"));
        assert!(r[1].num("lid").unwrap_err().contains("no field"));
    }
}
