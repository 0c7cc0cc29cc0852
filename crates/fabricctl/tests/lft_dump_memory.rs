//! `route --lft-out` streams the dump (issue #17): the real binary runs under an address-space
//! cap (`prlimit --as`) well below the size of the dump it writes. The former writer built the
//! whole dump as one string and died of it under this cap.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::Command;

/// 1 536 end ports, 448 switches: the LMC 1 dump is ~105 MB, the tables 1.6 MB.
const SPEC: &str = "PGFT(3;8,8,24;1,8,8;1,1,1)";
/// RLIMIT_AS of the capped run (address space: binary, thread stacks, malloc arenas, heap). The
/// streaming writer runs in ~30 MiB; the former one needed the whole dump in one string.
const CAP_BYTES: u64 = 48 << 20;

fn fabricctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fabricctl"))
}

fn ok(c: &mut Command) -> String {
    let out = c.output().expect("run");
    assert!(
        out.status.success(),
        "{c:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn route_lft_out_streams_a_dump_bigger_than_its_memory_cap() {
    let d = TempDir(std::env::temp_dir().join(format!("fabricctl-lftcap-{}", std::process::id())));
    std::fs::create_dir_all(&d.0).unwrap();
    let file = |n: &str| d.0.join(n).display().to_string();
    let (topo, dump, g2l) = (file("p.topo"), file("lfts.dump"), file("guid2lid"));
    ok(fabricctl().args(["topo", "gen", SPEC, "-o", &topo]));
    ok(Command::new("prlimit")
        .arg(format!("--as={CAP_BYTES}"))
        .arg(env!("CARGO_BIN_EXE_fabricctl"))
        .args(["route", &topo, "--lmc", "1", "--lft-out", &dump, "--guid2lid-out", &g2l]));
    let size = std::fs::metadata(&dump).unwrap().len();
    assert!(size > 2 * CAP_BYTES, "dump of {size} bytes: not above twice the cap");

    // Every switch has a section that routes all 3 072 end-port LIDs (LMC 1) and its own LID
    // on port 0; the last line of a section names the top LID: 3 072 + 448 switch LIDs.
    let top = 1536 * 2 + 448;
    let mut sections = 0;
    let mut end_port_entries = 0u64;
    let mut lines = 0u64;
    let mut own_lid = None;
    for line in std::io::BufReader::new(std::fs::File::open(&dump).unwrap()).lines() {
        let line = line.unwrap();
        lines += 1;
        if let Some(rest) = line.strip_prefix("Unicast lids [0-") {
            sections += 1;
            assert!(rest.starts_with(&format!("{top}] of switch Lid ")), "{line}");
            own_lid = rest.split_whitespace().nth(4).map(|l| l.parse::<u32>().unwrap());
        } else if let Some(n) = line.strip_suffix(" lids dumped") {
            assert_eq!(n, top.to_string());
        } else {
            let mut it = line.split_whitespace();
            let lid = u32::from_str_radix(it.next().unwrap().strip_prefix("0x").unwrap(), 16).unwrap();
            let port: u8 = it.next().unwrap().parse().unwrap();
            assert!(lid <= top, "{line}");
            if line.contains("# Channel Adapter portguid 0x") {
                end_port_entries += 1;
                assert!((1..=24).contains(&port), "{line}");
            } else if Some(lid) == own_lid {
                assert_eq!(port, 0, "{line}");
            }
        }
    }
    assert_eq!(sections, 448);
    assert_eq!(end_port_entries, 448 * 1536 * 2);
    assert!(lines > end_port_entries + 448 * 2);

    // The dump reads back as tables that route every pair.
    let v: serde_json::Value = serde_json::from_str(&ok(fabricctl().args([
        "analyze",
        &topo,
        "--lfts",
        &dump,
        "--guid2lid",
        &g2l,
        "--rp",
        "1",
        "--no-a2a",
        "--json",
    ])))
    .unwrap();
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["unreachable_pairs"], 0, "{v}");
    assert_eq!(v["top_lid"], top, "{v}");
}
