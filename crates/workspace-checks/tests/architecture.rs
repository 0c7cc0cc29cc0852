//! The architecture invariants of `docs/ARCHITECTURE.md`, checked on the workspace's own files:
//! the `Cargo.toml` files (through `toml`) and the sources as text. Each test names the file (and
//! line) that breaks an invariant, and reports every breach at once.
//!
//! The data the invariants need (crate layers, allowed dependency edges, binary crates, the
//! `std` I/O exception of the topology file reader) is written out at the top of this file: a new
//! crate or a new edge between crates is a one-line change here, reviewed with the change that
//! needs it.
//!
//! `PENDING_*` lists hold today's breaches that a branch of issue #13 removes. An entry is tolerated
//! only as long as its breach exists: once fixed, the entry fails as stale, so the lists only
//! shrink (empty them when the restructuring branches are merged).
//!
//! `WORKSPACE_CHECKS_ROOT=DIR` checks another checkout (e.g. a branch's worktree) with the same
//! test binary.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

/// Production files (the part of a file before its `#[cfg(test)]` module) stay at or below this.
const MAX_PRODUCTION_LINES: usize = 800;

/// Files above the limit today, each split by a branch of issue #13: (path, production lines
/// today, branch). A listed file may not grow.
const PENDING_OVERSIZED: &[(&str, usize, &str)] = &[];

/// The layers of the workspace, bottom up. A normal dependency between workspace crates goes
/// from a higher layer to a strictly lower one, and is listed in [`ALLOWED_EDGES`].
const LAYERS: &[(&str, u8)] = &[
    // The fabric model.
    ("fabric-topology", 0),
    // Algorithm crates: synchronous, deterministic, no I/O.
    ("fabric-ranking", 1),
    ("fabric-partitions", 1),
    ("fabric-routing", 2),
    ("fabric-slurm", 2),
    ("fabric-metrics", 3),
    ("fabric-update", 3),
    ("fabric-sa", 3),
    // The southbound driver trait.
    ("fabric-southbound", 4),
    // Drivers, the gRPC API crate.
    ("fabric-mock", 5),
    ("fabric-umad", 5),
    ("fabric-oob", 5),
    ("fabric-proto", 5),
    // High availability: leader election, lease and shared state on etcd.
    ("fabric-ha", 5),
    // Binaries (the daemon's library exists for its tests and benches).
    ("fabricd", 6),
    ("fabricctl", 6),
    ("fabric-agent-sim", 6),
    ("fabric-umad-probe", 6),
    // Test support: dev-dependencies only, or no dependents at all.
    ("fabric-ibsim-harness", 7),
    ("fabric-etcd-harness", 7),
    ("workspace-checks", 7),
];

/// Crates that may only ever be dev-dependencies of other crates.
const DEV_ONLY: &[&str] = &["fabric-ibsim-harness", "fabric-etcd-harness"];

/// Every allowed normal (and build) dependency edge between workspace crates.
const ALLOWED_EDGES: &[(&str, &[&str])] = &[
    ("fabric-topology", &[]),
    ("fabric-ranking", &["fabric-topology"]),
    ("fabric-partitions", &["fabric-topology"]),
    ("fabric-routing", &["fabric-topology", "fabric-ranking"]),
    ("fabric-slurm", &["fabric-topology", "fabric-ranking"]),
    ("fabric-metrics", &["fabric-topology", "fabric-routing"]),
    ("fabric-update", &["fabric-topology", "fabric-routing"]),
    ("fabric-sa", &["fabric-topology", "fabric-routing"]),
    ("fabric-southbound", &["fabric-topology", "fabric-routing", "fabric-sa"]),
    (
        "fabric-mock",
        &["fabric-southbound", "fabric-topology", "fabric-routing"],
    ),
    (
        "fabric-umad",
        &["fabric-southbound", "fabric-topology", "fabric-routing", "fabric-sa"],
    ),
    (
        "fabric-oob",
        &["fabric-southbound", "fabric-topology", "fabric-routing"],
    ),
    ("fabric-proto", &[]),
    ("fabric-ha", &["fabric-southbound"]),
    (
        "fabricd",
        &[
            "fabric-topology",
            "fabric-ranking",
            "fabric-routing",
            "fabric-metrics",
            "fabric-update",
            "fabric-sa",
            "fabric-partitions",
            "fabric-slurm",
            "fabric-southbound",
            "fabric-mock",
            "fabric-umad",
            "fabric-oob",
            "fabric-proto",
            "fabric-ha",
        ],
    ),
    (
        "fabricctl",
        &[
            "fabric-topology",
            "fabric-ranking",
            "fabric-routing",
            "fabric-metrics",
            "fabric-sa",
            "fabric-partitions",
            "fabric-slurm",
            "fabric-proto",
        ],
    ),
    (
        "fabric-agent-sim",
        &[
            "fabric-topology",
            "fabric-routing",
            "fabric-southbound",
            "fabric-mock",
            "fabric-oob",
        ],
    ),
    (
        "fabric-umad-probe",
        &[
            "fabric-topology",
            "fabric-ranking",
            "fabric-routing",
            "fabric-southbound",
            "fabric-sa",
            "fabric-umad",
        ],
    ),
    ("fabric-ibsim-harness", &[]),
    ("fabric-etcd-harness", &[]),
    ("workspace-checks", &[]),
];

/// Edges that exist today and are not allowed: (from, to, branch removing it).
const PENDING_EDGES: &[(&str, &str, &str)] = &[];

/// Algorithm crates: synchronous, free of I/O.
const ALGORITHM_CRATES: &[&str] = &[
    "fabric-topology",
    "fabric-ranking",
    "fabric-routing",
    "fabric-metrics",
    "fabric-update",
    "fabric-sa",
    "fabric-partitions",
    "fabric-slurm",
];

/// Crates that bring async or I/O (or their runtimes and protocols) into a crate.
const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio-stream",
    "tokio-util",
    "futures",
    "async-trait",
    "mio",
    "tonic",
    "tonic-prost",
    "prost",
    "hyper",
    "hyper-util",
    "tower",
    "nix",
    "libc",
    "rustix",
    "socket2",
    "tempfile",
    "atomic-write-file",
    "sd-notify",
];

/// `std` modules doing I/O, not to be used by the algorithm crates' production code.
const IO_STD_MODULES: &[&str] = &["fs", "net", "process", "os"];

/// The one exception: the bounded text-file reader every input file of the daemon and the CLI
/// goes through (`fabric_topology::textfile`; blocking `std::fs`, no runtime).
const IO_STD_ALLOWED_FILES: &[&str] = &["crates/fabric-topology/src/textfile.rs"];

/// Crates that are binaries (a library there serves only their own tests and benches): they may
/// depend on `anyhow`; their library sources still may not use it.
const BINARY_CRATES: &[&str] = &["fabricd", "fabricctl", "fabric-agent-sim", "fabric-umad-probe"];

/// Library crates depending on `anyhow` today: (crate, branch removing it).
const PENDING_ANYHOW: &[(&str, &str)] = &[];

/// The driver-trait crate: depends on no driver and on none of the crates the mock fabric needs.
const DRIVER_TRAIT_CRATE: &str = "fabric-southbound";
const DRIVER_CRATES: &[&str] = &["fabric-mock", "fabric-umad", "fabric-oob"];
const DRIVER_TRAIT_FORBIDDEN: &[&str] = &["rayon", "rand", "rand_chacha"];

/// Dependencies of the driver-trait crate that exist today: (dependency, branch removing it).
const PENDING_DRIVER_TRAIT_DEPS: &[(&str, &str)] = &[];

/// Where `unsafe` code may appear (prefix of a workspace-relative path).
const UNSAFE_ALLOWED_PREFIX: &str = "crates/fabric-umad/src/transport";

/// Files that may carry `allow(unsafe_code)`: the declaration of the transport module, the
/// transport itself.
const UNSAFE_ALLOW_FILES: &[&str] = &["crates/fabric-umad/src/lib.rs"];

// ---------------------------------------------------------------------------------------------
// The workspace
// ---------------------------------------------------------------------------------------------

fn root() -> PathBuf {
    std::env::var_os("WORKSPACE_CHECKS_ROOT")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."), PathBuf::from)
        .canonicalize()
        .expect("workspace root")
}

/// `path` relative to the workspace root, with `/` separators.
fn rel(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

struct Crate {
    name: String,
    dir: PathBuf,
    manifest: toml::Table,
}

impl Crate {
    /// Workspace crates and other packages this crate depends on in `section`
    /// (`dependencies`, `dev-dependencies`, `build-dependencies`), target-specific ones included.
    fn deps(&self, section: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut add = |t: Option<&toml::Value>| {
            if let Some(t) = t.and_then(toml::Value::as_table) {
                for (key, v) in t {
                    // `foo = { package = "bar" }` depends on bar.
                    let name = v.get("package").and_then(toml::Value::as_str).unwrap_or(key);
                    out.insert(name.to_string());
                }
            }
        };
        add(self.manifest.get(section));
        if let Some(targets) = self.manifest.get("target").and_then(toml::Value::as_table) {
            for t in targets.values() {
                add(t.get(section));
            }
        }
        out
    }

    /// Normal and build dependencies (what the crate's own code links).
    fn normal_deps(&self) -> BTreeSet<String> {
        let mut d = self.deps("dependencies");
        d.extend(self.deps("build-dependencies"));
        d
    }
}

fn crates() -> Vec<Crate> {
    let mut out = Vec::new();
    let dir = root().join("crates");
    let mut entries: Vec<_> = fs::read_dir(&dir)
        .expect("crates/")
        .map(|e| e.expect("crates/ entry").path())
        .collect();
    entries.sort();
    for d in entries {
        let path = d.join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let manifest: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", rel(&path)));
        let name = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
            .unwrap_or_else(|| panic!("{}: no package.name", rel(&path)))
            .to_string();
        out.push(Crate { name, dir: d, manifest });
    }
    assert!(out.len() >= 10, "found only {} crates under {}", out.len(), rel(&dir));
    out
}

/// Every `.rs` file under `dir`, sorted.
fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd {
            let p = e.expect("directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", rel(path)))
}

/// A source file of a crate's `src/`, split into its production part and the rest.
struct Source {
    path: PathBuf,
    text: String,
    /// Lines of the production part: everything before the file's inline `#[cfg(test)] mod`.
    production_lines: usize,
}

impl Source {
    fn production(&self) -> impl Iterator<Item = (usize, &str)> {
        self.text
            .lines()
            .take(self.production_lines)
            .enumerate()
            .map(|(i, l)| (i + 1, l))
    }
}

/// The item an attribute at line `i` applies to: the next line that is neither blank, a
/// comment, nor another attribute.
fn item_after(lines: &[&str], i: usize) -> Option<&'static str> {
    for l in &lines[i + 1..] {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with("//") || t.starts_with("#[") {
            continue;
        }
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let Some(rest) = t.strip_prefix("mod ") else {
            return Some("other");
        };
        return Some(if rest.trim_end().ends_with(';') {
            "mod-file"
        } else {
            "mod-inline"
        });
    }
    None
}

/// The name of the test-only module declared by `#[cfg(test)] mod name;` at line `i`.
fn declared_mod_name(lines: &[&str], i: usize) -> Option<String> {
    lines[i + 1..]
        .iter()
        .map(|l| l.trim())
        .find(|t| !t.is_empty() && !t.starts_with("//") && !t.starts_with("#["))
        .and_then(|t| t.split("mod ").nth(1))
        .map(|r| r.trim_end_matches(';').trim().to_string())
}

/// The production sources of a crate's `src/`: test-only module files (declared
/// `#[cfg(test)] mod x;`) left out, and each file cut at its inline `#[cfg(test)] mod`.
fn production_sources(krate: &Crate) -> Vec<Source> {
    let src = krate.dir.join("src");
    let files = rs_files(&src);
    let mut test_only: BTreeSet<PathBuf> = BTreeSet::new();
    let mut out = Vec::new();
    for path in &files {
        let text = read(path);
        let lines: Vec<&str> = text.lines().collect();
        let mut production_lines = lines.len();
        for (i, l) in lines.iter().enumerate() {
            if l.trim() != "#[cfg(test)]" {
                continue;
            }
            match item_after(&lines, i) {
                Some("mod-inline") if l.starts_with('#') => {
                    production_lines = i;
                    break;
                }
                Some("mod-file") => {
                    let Some(name) = declared_mod_name(&lines, i) else {
                        continue;
                    };
                    // Children of `lib.rs`/`main.rs`/`mod.rs` sit beside it, of `a.rs` in `a/`.
                    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
                    let parent = path.parent().expect("parent");
                    let dir = if matches!(stem, "lib" | "main" | "mod") {
                        parent.to_path_buf()
                    } else {
                        parent.join(stem)
                    };
                    test_only.insert(dir.join(format!("{name}.rs")));
                    test_only.insert(dir.join(&name));
                }
                _ => {}
            }
        }
        out.push(Source {
            path: path.clone(),
            text,
            production_lines,
        });
    }
    out.retain(|s| !test_only.iter().any(|t| s.path.starts_with(t)));
    out
}

/// Every `.rs` file of a crate: `src/`, `tests/`, `benches/`, `examples/`, `build.rs`.
fn all_rust_files(krate: &Crate) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in ["src", "tests", "benches", "examples"] {
        out.extend(rs_files(&krate.dir.join(d)));
    }
    let build = krate.dir.join("build.rs");
    if build.is_file() {
        out.push(build);
    }
    out
}

/// Fails with every breach at once.
fn assert_none(what: &str, breaches: &[String]) {
    assert!(
        breaches.is_empty(),
        "{what}:\n  {}\n({} breach(es); see crates/workspace-checks/tests/architecture.rs)",
        breaches.join("\n  "),
        breaches.len()
    );
}

fn layer(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|&(_, l)| l)
}

// ---------------------------------------------------------------------------------------------
// File size
// ---------------------------------------------------------------------------------------------

#[test]
fn no_production_file_above_the_line_limit() {
    let mut breaches = Vec::new();
    let mut seen = BTreeSet::new();
    for krate in crates() {
        for s in production_sources(&krate) {
            let path = rel(&s.path);
            let n = s.production_lines;
            match PENDING_OVERSIZED.iter().find(|(p, _, _)| *p == path) {
                Some(&(_, today, branch)) => {
                    seen.insert(path.clone());
                    if n > today {
                        breaches.push(format!(
                            "{path}: {n} production lines, grew from {today} (over {MAX_PRODUCTION_LINES}; \
                             {branch} splits it)"
                        ));
                    } else if n <= MAX_PRODUCTION_LINES {
                        breaches.push(format!(
                            "{path}: {n} production lines, under the limit now: remove it from PENDING_OVERSIZED"
                        ));
                    }
                }
                None if n > MAX_PRODUCTION_LINES => breaches.push(format!(
                    "{path}: {n} production lines (limit {MAX_PRODUCTION_LINES}; the part before #[cfg(test)])"
                )),
                None => {}
            }
        }
    }
    for (p, _, _) in PENDING_OVERSIZED {
        if !seen.contains(*p) {
            breaches.push(format!("{p}: no longer exists: remove it from PENDING_OVERSIZED"));
        }
    }
    assert_none("production files above the line limit", &breaches);
}

// ---------------------------------------------------------------------------------------------
// Crate layering
// ---------------------------------------------------------------------------------------------

#[test]
fn dependency_edges_between_workspace_crates_are_listed_and_run_down_the_layers() {
    let all = crates();
    let names: BTreeSet<&str> = all.iter().map(|c| c.name.as_str()).collect();
    let mut breaches = Vec::new();
    let mut pending_seen = BTreeSet::new();
    // The table itself: every listed edge runs down the layers.
    for (from, tos) in ALLOWED_EDGES {
        for to in *tos {
            match (layer(from), layer(to)) {
                (Some(a), Some(b)) if a > b => {}
                (Some(a), Some(b)) => {
                    breaches.push(format!(
                        "ALLOWED_EDGES: {from} (layer {a}) -> {to} (layer {b}) runs back up"
                    ));
                }
                _ => breaches.push(format!("ALLOWED_EDGES: {from} -> {to}: a crate missing from LAYERS")),
            }
        }
    }
    for krate in &all {
        let from = krate.name.as_str();
        let Some(from_layer) = layer(from) else {
            breaches.push(format!("{from}: not in LAYERS (add the new crate with its layer)"));
            continue;
        };
        let allowed = ALLOWED_EDGES
            .iter()
            .find(|(n, _)| *n == from)
            .map_or(&[][..], |&(_, e)| e);
        for to in krate.normal_deps().iter().filter(|d| names.contains(d.as_str())) {
            let to = to.as_str();
            if DEV_ONLY.contains(&to) {
                breaches.push(format!("{from} -> {to}: {to} is a dev-dependency only"));
            } else if PENDING_EDGES.iter().any(|&(f, t, _)| f == from && t == to) {
                pending_seen.insert((from.to_string(), to.to_string()));
            } else if !allowed.contains(&to) {
                breaches.push(format!(
                    "{from} -> {to}: not an allowed edge (ALLOWED_EDGES; layers {from_layer} -> {})",
                    layer(to).map_or("?".to_string(), |l| l.to_string())
                ));
            }
        }
        // Dev-dependencies (tests, benches) may reach down the layers or test support, never up.
        for to in krate
            .deps("dev-dependencies")
            .iter()
            .filter(|d| names.contains(d.as_str()))
        {
            let ok = DEV_ONLY.contains(&to.as_str()) || layer(to).is_some_and(|l| l < from_layer);
            if !ok {
                breaches.push(format!("{from} -> {to} (dev-dependency): runs back up the layers"));
            }
        }
    }
    for (f, t, branch) in PENDING_EDGES {
        if !pending_seen.contains(&(f.to_string(), t.to_string())) {
            breaches.push(format!("{f} -> {t}: gone ({branch}): remove it from PENDING_EDGES"));
        }
    }
    assert_none("dependency edges between workspace crates", &breaches);
}

#[test]
fn algorithm_crates_depend_on_no_async_or_io_crate_and_use_no_std_io() {
    let mut breaches = Vec::new();
    for krate in crates().iter().filter(|c| ALGORITHM_CRATES.contains(&c.name.as_str())) {
        for d in krate.normal_deps() {
            if IO_CRATES.contains(&d.as_str()) {
                breaches.push(format!("{}/Cargo.toml: depends on {d}", rel(&krate.dir)));
            }
        }
        for s in production_sources(krate) {
            let path = rel(&s.path);
            if IO_STD_ALLOWED_FILES.contains(&path.as_str()) {
                continue;
            }
            let code: Vec<&str> = s.production().map(|(_, l)| code_of(l)).collect();
            let code = code.join("\n");
            for (at, name) in path_heads(&code, "std::") {
                if IO_STD_MODULES.contains(&name.as_str()) {
                    let line = code[..at].matches('\n').count() + 1;
                    breaches.push(format!("{path}:{line}: uses std::{name}"));
                }
            }
        }
    }
    assert_none("I/O in the algorithm crates", &breaches);
}

#[test]
fn no_library_crate_depends_on_anyhow() {
    let mut breaches = Vec::new();
    let mut pending_seen = BTreeSet::new();
    for krate in crates() {
        let name = krate.name.as_str();
        if BINARY_CRATES.contains(&name) {
            // The library part of a binary crate (if any) still returns typed errors.
            if !krate.dir.join("src/lib.rs").is_file() {
                continue;
            }
            for s in production_sources(&krate) {
                let path = rel(&s.path);
                if path.ends_with("/src/main.rs") || path.contains("/src/bin/") {
                    continue;
                }
                for (n, line) in s.production() {
                    if !line.trim_start().starts_with("//") && line.contains("anyhow") {
                        breaches.push(format!("{path}:{n}: anyhow in the library of {name}"));
                    }
                }
            }
        } else if krate.normal_deps().contains("anyhow") {
            if PENDING_ANYHOW.iter().any(|(c, _)| *c == name) {
                pending_seen.insert(name.to_string());
            } else {
                breaches.push(format!(
                    "{}/Cargo.toml: library crate {name} depends on anyhow",
                    rel(&krate.dir)
                ));
            }
        }
    }
    for (c, branch) in PENDING_ANYHOW {
        if !pending_seen.contains(*c) {
            breaches.push(format!(
                "{c}: no longer depends on anyhow ({branch}): remove it from PENDING_ANYHOW"
            ));
        }
    }
    assert_none("anyhow in libraries", &breaches);
}

#[test]
fn the_driver_trait_crate_depends_on_no_driver_and_no_mock_fabric_crates() {
    let all = crates();
    let krate = all
        .iter()
        .find(|c| c.name == DRIVER_TRAIT_CRATE)
        .expect("the driver-trait crate");
    let deps = krate.normal_deps();
    let mut breaches = Vec::new();
    for d in DRIVER_CRATES {
        if deps.contains(*d) {
            breaches.push(format!("{DRIVER_TRAIT_CRATE} depends on the driver {d}"));
        }
    }
    for d in DRIVER_TRAIT_FORBIDDEN {
        match (
            deps.contains(*d),
            PENDING_DRIVER_TRAIT_DEPS.iter().find(|(p, _)| p == d),
        ) {
            (true, None) => breaches.push(format!("{DRIVER_TRAIT_CRATE} depends on {d}")),
            (false, Some((_, branch))) => breaches.push(format!(
                "{DRIVER_TRAIT_CRATE} no longer depends on {d} ({branch}): remove it from PENDING_DRIVER_TRAIT_DEPS"
            )),
            _ => {}
        }
    }
    assert_none("dependencies of the driver-trait crate", &breaches);
}

// ---------------------------------------------------------------------------------------------
// Lints
// ---------------------------------------------------------------------------------------------

#[test]
fn every_crate_takes_the_workspace_lints_and_fabric_umad_the_same_with_unsafe_denied() {
    let root_manifest: toml::Table = read(&root().join("Cargo.toml")).parse().expect("Cargo.toml");
    let lints = root_manifest
        .get("workspace")
        .and_then(|w| w.get("lints"))
        .expect("[workspace.lints]");
    let mut breaches = Vec::new();
    if lints
        .get("rust")
        .and_then(|r| r.get("unsafe_code"))
        .and_then(toml::Value::as_str)
        != Some("forbid")
    {
        breaches.push("Cargo.toml: [workspace.lints.rust] unsafe_code is not \"forbid\"".to_string());
    }
    let clippy = lints
        .get("clippy")
        .cloned()
        .unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
    for krate in crates() {
        let path = format!("{}/Cargo.toml", rel(&krate.dir));
        let own = krate.manifest.get("lints");
        if krate.name == "fabric-umad" {
            let unsafe_level = own
                .and_then(|l| l.get("rust"))
                .and_then(|r| r.get("unsafe_code"))
                .and_then(toml::Value::as_str);
            if unsafe_level != Some("deny") {
                breaches.push(format!("{path}: [lints.rust] unsafe_code = \"deny\" missing"));
            }
            if own.and_then(|l| l.get("clippy")) != Some(&clippy) {
                breaches.push(format!("{path}: [lints.clippy] differs from [workspace.lints.clippy]"));
            }
        } else if own.and_then(|l| l.get("workspace")).and_then(toml::Value::as_bool) != Some(true) {
            breaches.push(format!("{path}: [lints] workspace = true missing"));
        }
    }
    assert_none("crate lints", &breaches);
}

// ---------------------------------------------------------------------------------------------
// unsafe
// ---------------------------------------------------------------------------------------------

/// Where a `//` comment starts in `line`, if it has one: the first `//` outside a string
/// literal (a `'"'` char literal does not open one).
fn comment_start(line: &str) -> Option<usize> {
    string_and_comment_scan(line).1
}

/// The byte ranges of `line` inside string literals, and where its `//` comment starts.
fn string_and_comment_scan(line: &str) -> (Vec<(usize, usize)>, Option<usize>) {
    let bytes = line.as_bytes();
    let mut strings = Vec::new();
    let mut open: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match open {
            Some(start) => {
                if c == b'\\' {
                    i += 1; // the escaped character
                } else if c == b'"' {
                    strings.push((start, i));
                    open = None;
                }
            }
            None if c == b'"' && !(i > 0 && bytes[i - 1] == b'\'' && bytes.get(i + 1) == Some(&b'\'')) => {
                open = Some(i);
            }
            None if c == b'/' && bytes.get(i + 1) == Some(&b'/') => return (strings, Some(i)),
            None => {}
        }
        i += 1;
    }
    if let Some(start) = open {
        strings.push((start, bytes.len()));
    }
    (strings, None)
}

/// True when byte offset `at` of `line` lies inside a string literal or a `//` comment.
fn in_string_or_comment(line: &str, at: usize) -> bool {
    let (strings, comment) = string_and_comment_scan(line);
    comment.is_some_and(|c| at >= c) || strings.iter().any(|&(a, b)| a < at && at <= b)
}

/// Byte offsets of `word` in `text` (one or more lines) where it is code: outside string literals
/// and comments, and not the tail of a longer name or path (`not_unsafe`, `$crate::`, `a::super`).
fn code_occurrences(text: &str, word: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        from = at + word.len();
        let prev = if at == 0 { b' ' } else { bytes[at - 1] };
        if prev.is_ascii_alphanumeric() || matches!(prev, b'_' | b'$' | b':') {
            continue;
        }
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let line_end = text[at..].find('\n').map_or(text.len(), |n| at + n);
        if !in_string_or_comment(&text[line_start..line_end], at - line_start) {
            out.push(at);
        }
    }
    out
}

/// Offsets of the `unsafe` keyword starting a block, fn, impl, trait or extern block.
fn unsafe_keywords(line: &str) -> Vec<usize> {
    code_occurrences(line, "unsafe")
        .into_iter()
        .filter(|&at| {
            let rest = line[at + "unsafe".len()..].trim_start();
            rest.is_empty()
                || ["{", "fn ", "impl", "trait ", "extern "]
                    .iter()
                    .any(|k| rest.starts_with(k))
        })
        .collect()
}

/// True when a `// SAFETY:` comment precedes line `i` (in the comment/attribute lines right above
/// it, or earlier on the same line).
fn has_safety_comment(lines: &[&str], i: usize, at: usize) -> bool {
    if lines[i][..at].contains("SAFETY:") {
        return true;
    }
    for l in lines[..i].iter().rev() {
        let t = l.trim_start();
        if t.starts_with("//") {
            if t.contains("SAFETY:") {
                return true;
            }
        } else if !t.starts_with("#[") {
            return false;
        }
    }
    false
}

#[test]
fn unsafe_code_only_in_the_umad_transport_each_with_a_safety_comment() {
    let mut breaches = Vec::new();
    let mut found = 0;
    for krate in crates() {
        for path in all_rust_files(&krate) {
            let p = rel(&path);
            if p.starts_with("crates/workspace-checks/") {
                continue; // this file spells the keyword in its patterns
            }
            let text = read(&path);
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if line.contains("allow(unsafe_code)")
                    && !line.trim_start().starts_with("//")
                    && !(UNSAFE_ALLOW_FILES.contains(&p.as_str()) || p.starts_with(UNSAFE_ALLOWED_PREFIX))
                {
                    breaches.push(format!("{p}:{}: allow(unsafe_code) outside the umad transport", i + 1));
                }
                for at in unsafe_keywords(line) {
                    found += 1;
                    if !p.starts_with(UNSAFE_ALLOWED_PREFIX) {
                        breaches.push(format!("{p}:{}: unsafe outside {UNSAFE_ALLOWED_PREFIX}*", i + 1));
                    } else if !has_safety_comment(&lines, i, at) {
                        breaches.push(format!("{p}:{}: unsafe without a // SAFETY: comment above it", i + 1));
                    }
                }
            }
        }
    }
    // The search itself must see the transport's system calls, or it is looking at nothing.
    assert!(
        found > 0,
        "no unsafe found at all: the search is broken (the umad transport has some)"
    );
    assert_none("unsafe code", &breaches);
}

// ---------------------------------------------------------------------------------------------
// Module import cycles
// ---------------------------------------------------------------------------------------------

/// The module path of a source file under `src/`: `a.rs` and `a/mod.rs` → `[a]`,
/// `a/b.rs` → `[a, b]`; the crate root (`lib.rs`, `main.rs`) → `[]`. `None` for `src/bin/`.
fn module_path(src: &Path, file: &Path) -> Option<Vec<String>> {
    let r = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = r.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.trim_end_matches(".rs");
    if !(matches!(stem, "mod") || (parts.is_empty() && matches!(stem, "lib" | "main"))) {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// Identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first names after each `prefix` path in `code`: `prefix::x` gives `x`,
/// `prefix::{x, y::z, …}` (over several lines too) gives `x` and `y`; with their byte offsets.
fn path_heads(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for at in code_occurrences(code, prefix) {
        let rest = &code[at + prefix.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.push((at, ident(rest).to_string()));
            continue;
        };
        // The group's names at depth 0.
        let mut depth = 0;
        let mut start = true;
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c if start && (c.is_ascii_alphabetic() || c == '_') => {
                    out.push((at, ident(&group[j..]).to_string()));
                    start = false;
                }
                c if !c.is_whitespace() => start = false,
                _ => {}
            }
        }
    }
    out
}

/// The top-level modules that `code` (lines of module `module`, comments removed) refers to by
/// `crate::` paths or `super::` paths reaching the crate root, each with its byte offset.
fn referenced_top_modules(code: &str, module: &[String]) -> Vec<(usize, String)> {
    let mut out = path_heads(code, "crate::");
    // `super::…`, resolved against the file's module path (a chain counts from its start).
    for at in code_occurrences(code, "super::") {
        let mut rest = &code[at..];
        let mut path = module.to_vec();
        while let Some(r) = rest.strip_prefix("super::") {
            path.pop();
            rest = r;
        }
        if path.is_empty() {
            out.push((at, ident(rest).to_string()));
        }
    }
    out.retain(|(_, m)| !m.is_empty() && m != "self" && m != "super");
    out
}

/// `line` without its `//` comment.
fn code_of(line: &str) -> &str {
    comment_start(line).map_or(line, |c| &line[..c])
}

/// Module import graph of a crate's production code: top-level module → (used top-level module
/// → first `file:line` using it).
fn import_graph(krate: &Crate) -> BTreeMap<String, BTreeMap<String, String>> {
    let src = krate.dir.join("src");
    let sources = production_sources(krate);
    let top: BTreeSet<String> = sources
        .iter()
        .filter_map(|s| module_path(&src, &s.path))
        .filter_map(|p| p.first().cloned())
        .collect();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for s in &sources {
        let Some(module) = module_path(&src, &s.path) else {
            continue;
        };
        let Some(from) = module.first() else { continue }; // the crate root uses everything
        let code: Vec<&str> = s.production().map(|(_, l)| code_of(l)).collect();
        let code = code.join("\n");
        for (at, to) in referenced_top_modules(&code, &module) {
            if &to != from && top.contains(&to) {
                let line = code[..at].matches('\n').count() + 1;
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{}:{line}", rel(&s.path)));
            }
        }
    }
    graph
}

/// One cycle of the graph per strongly connected component with more than one module, each
/// written `a -> b (file:line) -> a (file:line)`.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flat_map(BTreeMap::keys)).collect();
    let reach = |from: &String| -> BTreeMap<String, String> {
        // Breadth-first predecessors from `from`.
        let mut pred: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from.clone()]);
        while let Some(n) = queue.pop_front() {
            for m in graph.get(&n).into_iter().flat_map(BTreeMap::keys) {
                if !pred.contains_key(m) {
                    pred.insert(m.clone(), n.clone());
                    queue.push_back(m.clone());
                }
            }
        }
        pred
    };
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for n in nodes {
        if done.contains(n) {
            continue;
        }
        let pred = reach(n);
        if !pred.contains_key(n) {
            continue;
        }
        // Walk the predecessors back from n to n: the shortest cycle through n.
        let mut path = vec![n.clone()];
        let mut cur = pred[n].clone();
        while &cur != n {
            path.push(cur.clone());
            cur = pred[&cur].clone();
        }
        path.push(n.clone());
        path.reverse();
        done.extend(path.iter().cloned());
        let mut text = path[0].clone();
        for w in path.windows(2) {
            let at = &graph[&w[0]][&w[1]];
            text.push_str(&format!(" -> {} ({at})", w[1]));
        }
        out.push(text);
    }
    out
}

#[test]
fn no_module_import_cycle_in_any_crate() {
    let mut breaches = Vec::new();
    for krate in crates() {
        for c in cycles(&import_graph(&krate)) {
            breaches.push(format!("{}: {c}", krate.name));
        }
    }
    assert_none("module import cycles", &breaches);
}

/// The cycle search finds a planted cycle and names its files: a check that cannot fail is no
/// check.
#[test]
fn the_cycle_search_finds_a_planted_cycle() {
    let m = |s: &str| s.to_string();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    graph.entry(m("a")).or_default().insert(m("b"), m("src/a.rs:3"));
    graph.entry(m("b")).or_default().insert(m("c"), m("src/b/x.rs:9"));
    graph.entry(m("c")).or_default().insert(m("a"), m("src/c.rs:1"));
    graph.entry(m("c")).or_default().insert(m("d"), m("src/c.rs:2"));
    assert_eq!(
        cycles(&graph),
        vec![m("a -> b (src/a.rs:3) -> c (src/b/x.rs:9) -> a (src/c.rs:1)")]
    );
    graph.get_mut("c").expect("c").remove("a");
    assert!(cycles(&graph).is_empty());
}

#[test]
fn module_references_are_read_from_crate_and_super_paths() {
    let m = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    let refs = |code: &str, module: &[&str]| -> Vec<String> {
        referenced_top_modules(code, &m(module))
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    };
    assert_eq!(refs("use crate::dmodc::{fill, Prepared};", &["group"]), m(&["dmodc"]));
    assert_eq!(
        refs("use crate::{lid::LidPlan, lft::{Lfts, Block}, check};", &["x"]),
        m(&["lid", "lft", "check"])
    );
    // rustfmt's multi-line groups.
    assert_eq!(
        refs(
            "use crate::{\n    config::{A, B},\n    state::Published,\n};\nfn f() {}",
            &["x"]
        ),
        m(&["config", "state"])
    );
    assert_eq!(refs("use super::group::NodeGroups;", &["dmodk"]), m(&["group"]));
    // `super` inside a submodule stays in its own top-level module.
    assert!(refs("use super::Install;", &["event_loop", "commit"]).is_empty());
    assert_eq!(
        refs("use super::super::state::Published;", &["event_loop", "commit"]),
        m(&["state"])
    );
    assert!(refs("$crate::x::y!()", &["a"]).is_empty());
    assert!(refs("let s = \"crate::x\";", &["a"]).is_empty());
    assert_eq!(refs("if c == '\"' { crate::x::f() }", &["a"]), m(&["x"]));
    let std_heads: Vec<String> = path_heads("use std::{\n    fs::File,\n    io::Read,\n};", "std::")
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    assert_eq!(std_heads, m(&["fs", "io"]));
    assert_eq!(code_of("let u = \"http://x\"; // crate::y"), "let u = \"http://x\"; ");
}

#[test]
fn the_unsafe_search_sees_blocks_fns_and_impls_not_words() {
    assert_eq!(unsafe_keywords("    let fd = unsafe { libc::open(p) };"), vec![13]);
    assert_eq!(unsafe_keywords("unsafe fn f() {}"), vec![0]);
    assert_eq!(unsafe_keywords("unsafe impl Send for X {}"), vec![0]);
    assert!(unsafe_keywords("// unsafe { }").is_empty());
    assert!(unsafe_keywords("let s = \"unsafe { }\";").is_empty());
    assert!(unsafe_keywords("#![forbid(unsafe_code)]").is_empty());
    assert!(unsafe_keywords("let not_unsafe = 1;").is_empty());
}

/// The `async fn`s the event loop may have: its `run` (the `select!`) and the two timer futures
/// it selects on. Everything else of `fabricd::event_loop` is a synchronous handler or a task body.
const LOOP_ASYNC_FNS: &[&str] = &["run", "sleep_until_opt", "tick_opt", "changed_opt"];

#[test]
fn event_loop_handlers_are_synchronous() {
    let fabricd = crates()
        .into_iter()
        .find(|c| c.name == "fabricd")
        .expect("crate fabricd");
    let dir = fabricd.dir.join("src").join("event_loop");
    let mut breaches = Vec::new();
    let mut files = 0;
    for s in production_sources(&fabricd) {
        if !s.path.starts_with(&dir) {
            continue;
        }
        files += 1;
        for (i, line) in s.text.lines().take(s.production_lines).enumerate() {
            let code = code_of(line);
            let Some(at) = code.find("async fn ") else { continue };
            let name = ident(&code[at + "async fn ".len()..]);
            if !LOOP_ASYNC_FNS.contains(&name) {
                breaches.push(format!(
                    "{}:{}: `async fn {name}`: a loop handler awaits (run I/O in a task of tasks.rs that answers with an internal event)",
                    rel(&s.path),
                    i + 1
                ));
            }
        }
    }
    assert!(files >= 5, "found only {files} production files under {}", rel(&dir));
    assert_none("asynchronous event loop handlers", &breaches);
}
