//! Acceptance of `fabricctl export slurm` by Slurm's own parser: the topology.conf written for
//! every real `ibnetdiscover` dump of fabric-topology and for generated fat-trees is loaded by a
//! real `slurmctld` (Debian's slurmctld 22.05: `TopologyPlugin=topology/tree`, the exported hosts
//! as nodes, `auth/none`, state in a temporary directory, run as root), and `scontrol show
//! topology` lists exactly the switches, nodes and child switches of the file.
//!
//! Slurm 22.05 has neither topology/block nor topology.yaml: those formats are checked against
//! the documented grammar in `fabric-slurm/tests/export.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fabric_slurm::hostlist::expand;

fn fabricctl(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fabricctl"))
        .args(args)
        .output()
        .expect("run fabricctl");
    assert!(
        out.status.success(),
        "fabricctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `SwitchName` → (nodes, child switches), from topology.conf or `scontrol show topology`
/// (where an upper switch also lists every node below it: its nodes are ignored then).
fn switches(text: &str) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("SwitchName=")) {
        let mut name = String::new();
        let (mut nodes, mut children) = (BTreeSet::new(), BTreeSet::new());
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "SwitchName" => name = v.to_string(),
                "Nodes" => nodes = expand(v).unwrap().into_iter().collect(),
                "Switches" => children = expand(v).unwrap().into_iter().collect(),
                _ => {}
            }
        }
        if !children.is_empty() {
            nodes.clear();
        }
        out.insert(name, (nodes, children));
    }
    out
}

struct Ctld {
    child: Child,
}

impl Drop for Ctld {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes slurm.conf beside `topology.conf` in `dir`, starts slurmctld, returns `scontrol show
/// topology` once it answers.
fn slurm_show_topology(dir: &Path, hosts: &str) -> String {
    let host = String::from_utf8(Command::new("hostname").arg("-s").output().expect("hostname").stdout).unwrap();
    for d in ["state", "spool"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let d = dir.display();
    let conf = format!(
        "ClusterName=fabtest\nSlurmctldHost={}\nSlurmctldPort={}\nSlurmdPort={}\nAuthType=auth/none\n\
         CredType=cred/none\nSlurmUser=root\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\nSlurmctldLogFile={d}/slurmctld.log\nMailProg=/bin/true\n\
         MpiDefault=none\nTopologyPlugin=topology/tree\nSelectType=select/cons_tres\n\
         ProctrackType=proctrack/linuxproc\nReturnToService=2\n\
         NodeName={hosts} CPUs=1 NodeAddr=127.0.0.1 State=UNKNOWN\nPartitionName=all Nodes=ALL Default=YES\n",
        host.trim(),
        free_port(),
        free_port()
    );
    let conf_path = dir.join("slurm.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new("slurmctld")
        .args(["-D", "-i", "-f"])
        .arg(&conf_path)
        .env("SLURM_CONF", &conf_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("slurmctld (Debian package slurmctld) must be installed");
    let mut ctld = Ctld { child };
    let t = Instant::now();
    loop {
        let out = Command::new("scontrol")
            .args(["show", "topology"])
            .env("SLURM_CONF", &conf_path)
            .output()
            .expect("scontrol (Debian package slurm-client) must be installed");
        if out.status.success() && !out.stdout.is_empty() {
            return String::from_utf8(out.stdout).unwrap();
        }
        if let Ok(Some(st)) = ctld.child.try_wait() {
            let log = std::fs::read_to_string(dir.join("slurmctld.log")).unwrap_or_default();
            panic!("slurmctld exited ({st}) on {}:\n{log}", dir.display());
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "scontrol: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn accept(name: &str, topology_file: &Path) {
    let dir = std::env::temp_dir().join(format!("fabricctl-slurm-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("topology.conf");
    fabricctl(&[
        "export",
        "slurm",
        "--format",
        "tree",
        "--topology",
        topology_file.to_str().unwrap(),
        "-o",
        conf.to_str().unwrap(),
    ]);
    let written = std::fs::read_to_string(&conf).unwrap();
    let want = switches(&written);
    assert!(!want.is_empty(), "{name}: nothing exported");
    let hosts: BTreeSet<String> = want.values().flat_map(|v| v.0.iter().cloned()).collect();
    let hostlist = fabricctl(&[
        "hostlist",
        "compress",
        &hosts.iter().cloned().collect::<Vec<_>>().join(","),
    ]);
    let shown = slurm_show_topology(&dir, hostlist.trim());
    let got = switches(&shown);
    assert_eq!(
        got, want,
        "{name}: scontrol show topology differs from the export:\n{shown}"
    );
    eprintln!("{name}: slurmctld loaded {} switches, {} hosts", got.len(), hosts.len());
    let _ = std::fs::remove_dir_all(&dir);
}

fn real(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fabric-topology/tests/data/real")
        .join(name)
}

#[test]
fn slurmctld_loads_the_export_of_every_real_dump() {
    for f in [
        "switchib-edr-6sw-flat.ibnet",
        "loginoff-sx6036-fdr10-8sw.ibnet",
        "psmn-x5-voltaire4036-qdr.ibnet",
        "ibtopotool-ufm-lab-degraded.ibnet",
        "mlunacek-qdr-3xIS5600-214sw.ibnet",
    ] {
        accept(f.trim_end_matches(".ibnet"), &real(f));
    }
}

#[test]
fn slurmctld_loads_the_export_of_generated_fat_trees() {
    let dir = std::env::temp_dir().join(format!("fabricctl-slurm-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, spec) in ["PGFT(2;18,36;1,18;1,1)", "PGFT(3;4,4,4;1,2,2;1,2,1)"]
        .iter()
        .enumerate()
    {
        let f = dir.join(format!("gen{i}.topo"));
        fabricctl(&["topo", "gen", spec, "-o", f.to_str().unwrap()]);
        accept(&format!("gen{i}"), &f);
    }
    let f = dir.join("degraded.topo");
    fabricctl(&[
        "topo",
        "gen",
        "PGFT(3;4,4,4;1,2,2;1,2,1)",
        "-o",
        f.to_str().unwrap(),
        "--remove-links",
        "30",
        "--seed",
        "7",
    ]);
    accept("degraded", &f);
    let _ = std::fs::remove_dir_all(&dir);
}
