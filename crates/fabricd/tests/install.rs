//! `deploy/install.sh --destdir`: the staged tree of a fresh machine. Runs the real script with
//! the built `fabricd` and `fabricctl`, then checks the production config (umad, fault
//! injection off, passes `fabricd --check-config`), the simulator config beside it, every
//! document, the completions and man pages, the unit and drop-in paths under `--prefix`, and
//! `systemd-analyze verify` on the staged unit with its drop-in.
//!
//! `systemd-analyze verify` checks that `ExecStart=` binaries exist on the host, and the staged
//! ones live under the destdir: it runs on a copy of the staged unit directory whose binary
//! paths point into the destdir (`--root` would need a whole OS tree: `sysinit.target`,
//! `/bin/kill`). Its warnings go to stderr with exit code 0: stderr must be empty.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fabricctl_binary, test_dir};
use fabricd::config::{Config, DriverKind};

const PREFIX: &str = "/opt/fabricd";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `deploy/install.sh --destdir DESTDIR --bin-dir BIN --prefix PREFIX`.
fn install(bin: &Path, destdir: &Path) -> String {
    let out = Command::new("bash")
        .arg(repo().join("deploy/install.sh"))
        .args(["--destdir".as_ref(), destdir.as_os_str()])
        .args(["--bin-dir".as_ref(), bin.as_os_str()])
        .args(["--prefix", PREFIX])
        .output()
        .expect("run deploy/install.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "deploy/install.sh failed:\n{text}");
    text
}

fn staged(destdir: &Path, path: &str) -> PathBuf {
    destdir.join(path.trim_start_matches('/'))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn install_stages_a_production_tree_that_systemd_accepts() {
    let dir = test_dir("install");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_fabricd"), bin.join("fabricd")).unwrap();
    std::fs::copy(fabricctl_binary(), bin.join("fabricctl")).unwrap();
    let root = dir.join("root");
    install(&bin, &root);

    // The production config: umad, no fault injection.
    let prod_path = staged(&root, "/etc/fabricd/fabricd.toml");
    let prod_text = read(&prod_path);
    let prod = Config::parse(&prod_text, "fabricd.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(prod.driver.kind, DriverKind::Umad);
    assert!(!prod.fault_injection.enabled && !prod.fault_injection.allow_physical);
    // It passes --check-config; the umad device is the HCA's, which this machine may lack: the
    // same file with a character device that exists here.
    let fabricd = staged(&root, &format!("{PREFIX}/bin/fabricd"));
    let checked = dir.join("fabricd-check.toml");
    std::fs::write(
        &checked,
        prod_text.replace("device = \"/dev/infiniband/umad0\"", "device = \"/dev/null\""),
    )
    .unwrap();
    let check = |config: &Path| {
        let out = Command::new(&fabricd)
            .args(["--config".as_ref(), config.as_os_str(), "--check-config".as_ref()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} --check-config: {}{}",
            config.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    check(&checked);
    // The simulator config beside it: mock, drills on, valid.
    let sim_path = staged(&root, "/etc/fabricd/fabricd-sim.toml");
    let sim = Config::parse(&read(&sim_path), "fabricd-sim.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sim.driver.kind, DriverKind::Mock);
    assert!(sim.fault_injection.enabled);
    check(&sim_path);

    // Every document, the configuration reference, the Prometheus samples.
    let doc = staged(&root, &format!("{PREFIX}/share/doc/fabricd"));
    let mut docs = vec![PathBuf::from("README.md")];
    for e in std::fs::read_dir(repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(PathBuf::from(p.file_name().unwrap()));
        }
    }
    for name in [
        "routing.md",
        "update-protocol.md",
        "subnet-administration.md",
        "multicast-partitions.md",
    ] {
        assert!(docs.iter().any(|d| d == Path::new(name)), "docs/{name} is gone");
    }
    for d in docs.iter().map(PathBuf::as_path).chain([
        Path::new("fabricd.toml.reference"),
        Path::new("prometheus.yml"),
        Path::new("prometheus-rules.yml"),
    ]) {
        assert!(doc.join(d).is_file(), "{} not installed", d.display());
    }

    // Completions and man pages from fabricctl.
    for f in [
        "share/bash-completion/completions/fabricctl",
        "share/zsh/vendor-completions/_fabricctl",
        "share/fish/vendor_completions.d/fabricctl.fish",
        "share/man/man1/fabricctl.1",
    ] {
        let p = staged(&root, &format!("{PREFIX}/{f}"));
        assert!(!read(&p).is_empty(), "{} is empty", p.display());
    }

    // The unit follows --prefix; the umad drop-in and its module and udev rule are there.
    let unit = read(&staged(&root, "/etc/systemd/system/fabricd.service"));
    assert!(unit.contains(&format!("ExecStart={PREFIX}/bin/fabricd ")), "{unit}");
    assert!(
        unit.contains(&format!("Documentation=file:{PREFIX}/share/doc/fabricd/operations.md")),
        "{unit}"
    );
    assert!(!unit.contains("/usr/bin/fabricd"), "{unit}");
    let dropin = read(&staged(&root, "/etc/systemd/system/fabricd.service.d/umad.conf"));
    assert!(dropin.contains("DeviceAllow=char-infiniband_mad rw"), "{dropin}");
    assert!(dropin.contains("PrivateDevices=no"), "{dropin}");
    assert_eq!(
        read(&staged(&root, "/etc/modules-load.d/fabricd.conf")).lines().last(),
        Some("ib_umad")
    );
    assert!(read(&staged(&root, "/etc/udev/rules.d/90-fabricd-umad.rules")).contains("KERNEL==\"issm*\""));

    // systemd-analyze verify: the staged unit and its drop-in, binaries pointed into the destdir.
    let verify = dir.join("verify");
    std::fs::create_dir_all(verify.join("fabricd.service.d")).unwrap();
    let to_staged = |text: String| {
        text.replace(
            &format!("{PREFIX}/bin/"),
            &format!("{}/", fabricd.parent().unwrap().display()),
        )
    };
    std::fs::write(verify.join("fabricd.service"), to_staged(unit)).unwrap();
    std::fs::write(verify.join("fabricd.service.d/umad.conf"), to_staged(dropin)).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(verify.join("fabricd.service"))
        .output()
        .expect("systemd-analyze (Debian package systemd) must be installed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );

    // A second install keeps the operator's files and puts the shipped ones beside them.
    std::fs::write(&prod_path, "# edited by the operator\n").unwrap();
    let text = install(&bin, &root);
    assert_eq!(read(&prod_path), "# edited by the operator\n");
    assert!(text.contains("the shipped config is in"), "{text}");
    assert_eq!(read(&prod_path.with_extension("toml.new")), prod_text);
    assert!(sim_path.with_extension("toml.new").is_file());
}
