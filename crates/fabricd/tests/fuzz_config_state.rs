//! Fuzz targets of the daemon's own parsers: the configuration (`Config::parse`) and the state
//! files (`guid2lid`, `jobs.json`, `virtual-faults.json`, `update-progress.json`,
//! `generation.json`), as property tests that run in `cargo test` for a bounded time (stable
//! toolchain, no cargo-fuzz): random text, and structure-aware mutations (bytes, lines, numbers
//! replaced by extreme values, invalid UTF-8) of the committed seed corpus (`tests/data/fuzz/`
//! and the shipped `config/fabricd.toml`).
//!
//! Contract on any input: no panic; an error names the file (and the line and key of a
//! configuration error); valid input round-trips (parse → write → parse). `PROPTEST_CASES=N`
//! runs longer campaigns.

use fabricd::config::Config;
use fabricd::persist::{
    StateDir, UpdateProgress, GENERATION_FILE, GUID2LID_FILE, JOBS_FILE, UPDATE_PROGRESS_FILE, VIRTUAL_FAULTS_FILE,
};
use proptest::prelude::*;

const CONFIG: &str = include_str!("../../../config/fabricd.toml");
const STATE: [(&str, &str); 5] = [
    (GUID2LID_FILE, include_str!("data/fuzz/guid2lid")),
    (JOBS_FILE, include_str!("data/fuzz/jobs.json")),
    (VIRTUAL_FAULTS_FILE, include_str!("data/fuzz/virtual-faults.json")),
    (UPDATE_PROGRESS_FILE, include_str!("data/fuzz/update-progress.json")),
    (GENERATION_FILE, include_str!("data/fuzz/generation.json")),
];

/// Numbers a hostile or corrupted file may hold.
const EXTREME: [&str; 14] = [
    "0",
    "1",
    "-1",
    "0xc000",
    "0xffffff",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "1e400",
    "100000",
];

/// Fragments of TOML and JSON, inserted anywhere.
const FRAGMENTS: [&str; 14] = [
    "[routing]\n",
    "[driver.mock]\n",
    "= ",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\n",
    "threads = 100000\n",
    "\"generation\": ",
    "0x0002c90000000000",
    "\u{fffd}é",
];

#[path = "../../fabric-topology/tests/support/mutate.rs"]
mod mutate;
use mutate::{cases, mutate, mutations};

/// The configuration reader's contract on any text.
fn check_config(text: &str) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count();
    match Config::parse(text, "c.toml") {
        Err(e) => {
            prop_assert_eq!(e.source_name.as_str(), "c.toml");
            prop_assert!(!e.issues.is_empty());
            for i in &e.issues {
                if let Some(l) = i.line {
                    prop_assert!(l >= 1 && l <= lines, "line {} of {}: {}", l, lines, e);
                }
                prop_assert!(!i.message.is_empty(), "{}", e);
            }
            prop_assert!(e.to_string().starts_with("c.toml: "), "{}", e);
        }
        Ok(c) => {
            let out = toml::to_string(&c).expect("a parsed configuration serialises");
            let back = Config::parse(&out, "w.toml").map_err(|e| TestCaseError::fail(format!("{e}\n{out}")))?;
            prop_assert_eq!(back, c);
        }
    }
    Ok(())
}

/// Loads `name` from a state directory holding `bytes`: no panic, errors name the file, what
/// loads saves and loads back the same.
fn check_state(name: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    let d = tempfile::tempdir().unwrap();
    let s = StateDir::open(d.path()).unwrap();
    s.write_atomic(name, bytes).unwrap();
    let named = |e: &dyn std::fmt::Display| -> Result<(), TestCaseError> {
        prop_assert!(e.to_string().contains(name), "{} does not name {}", e, name);
        Ok(())
    };
    match name {
        GUID2LID_FILE => match s.load_guid2lid() {
            Err(e) => named(&e)?,
            Ok(g) => {
                s.save_guid2lid(&g).unwrap();
                prop_assert_eq!(s.load_guid2lid().unwrap(), g);
            }
        },
        JOBS_FILE => match s.load_jobs() {
            Err(e) => named(&e)?,
            Ok(j) => {
                s.save_jobs(&j).unwrap();
                prop_assert_eq!(s.load_jobs().unwrap(), j);
            }
        },
        VIRTUAL_FAULTS_FILE => match s.load_virtual_faults() {
            Err(e) => named(&e)?,
            Ok(v) => {
                s.save_virtual_faults(&v).unwrap();
                prop_assert_eq!(s.load_virtual_faults().unwrap(), v);
            }
        },
        UPDATE_PROGRESS_FILE => match s.load_update_progress() {
            Err(e) => named(&e)?,
            Ok(p) => {
                let p: UpdateProgress = p.expect("the file exists");
                // The next start numbers from it: it must have a successor.
                prop_assert!(p.generation >= 1 && p.generation < u64::MAX);
                s.save_update_progress(&p).unwrap();
                prop_assert_eq!(s.load_update_progress().unwrap(), Some(p));
            }
        },
        _ => match s.load_last_generation() {
            Err(e) => named(&e)?,
            Ok(g) => {
                let g = g.expect("the file exists");
                prop_assert!(g.generation >= 1 && g.generation < u64::MAX);
                s.save_last_generation(&g).unwrap();
                prop_assert_eq!(s.load_last_generation().unwrap(), Some(g));
            }
        },
    }
    Ok(())
}

/// `text` with an invalid UTF-8 byte at `pos` when `bad` is set.
fn bytes_of(text: &str, bad: bool, pos: usize) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    if bad {
        let p = pos % (b.len() + 1);
        b.insert(p, 0xff);
    }
    b
}

#[test]
fn seeds_are_valid_and_round_trip() {
    check_config(CONFIG).unwrap();
    Config::parse(CONFIG, "config/fabricd.toml").expect("the shipped config is valid");
    for (name, text) in STATE {
        check_state(name, text.as_bytes()).unwrap();
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.write_atomic(name, text.as_bytes()).unwrap();
        let loaded = match name {
            GUID2LID_FILE => s.load_guid2lid().map(|g| !g.is_empty()),
            JOBS_FILE => s.load_jobs().map(|j| !j.is_empty()),
            VIRTUAL_FAULTS_FILE => s.load_virtual_faults().map(|v| !v.is_empty()),
            UPDATE_PROGRESS_FILE => s.load_update_progress().map(|p| p.is_some()),
            _ => s.load_last_generation().map(|g| g.is_some()),
        };
        assert!(
            loaded.unwrap_or_else(|e| panic!("seed {name}: {e}")),
            "seed {name} is empty"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn config_arbitrary_text_never_panics(text in any::<String>()) {
        check_config(&text)?;
    }

    #[test]
    fn config_mutated_seed_never_panics(muts in mutations()) {
        check_config(&mutate(CONFIG, &muts))?;
    }

    #[test]
    fn state_files_arbitrary_bytes_never_panic(
        file in 0..STATE.len(),
        bytes in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        check_state(STATE[file].0, &bytes)?;
    }

    #[test]
    fn state_files_mutated_seeds_never_panic(
        file in 0..STATE.len(),
        muts in mutations(),
        bad in prop::bool::weighted(0.1),
        pos in any::<usize>(),
    ) {
        let (name, seed) = STATE[file];
        check_state(name, &bytes_of(&mutate(seed, &muts), bad, pos))?;
    }
}
