//! Fuzz targets of the LFT dump reader (`parse_opensm_lfts`, `OpensmLfts::to_lfts`) and the
//! `guid2lid` reader, as property tests that run in `cargo test` for a bounded time (stable
//! toolchain, no cargo-fuzz): random text, and structure-aware mutations (bytes, lines, numbers
//! replaced by extreme values) of the committed seed corpus `tests/data/fuzz/`.
//!
//! Contract on any input: no panic, no allocation of a size the input merely claims; an error
//! names the file and a line that exists. On valid input: parse → write → parse round-trips.
//! `PROPTEST_CASES=N` runs longer campaigns.

use fabric_routing::{
    assign_lids, parse_opensm_lfts, write_opensm_lfts, Guid2Lid, LftDumpError, Lfts, LidError, IB_MAX_UNICAST_LID,
    NO_ROUTE,
};
use fabric_topology::{ibnet, Fabric, SwitchId};
use proptest::prelude::*;

const TOPOLOGY: &str = include_str!("data/fuzz/pgft.topo");
const DUMPS: [&str; 3] = [
    include_str!("data/fuzz/pgft-lmc1.lfts.dump"),
    include_str!("data/fuzz/pgft-lmc0.lfts.dump"),
    include_str!("data/fuzz/ibroute-style.dump"),
];
const GUID2LIDS: [&str; 2] = [
    include_str!("data/fuzz/pgft-lmc1.guid2lid"),
    include_str!("data/fuzz/pgft-lmc0.guid2lid"),
];

/// Numbers a hostile or corrupted file may hold.
const EXTREME: [&str; 16] = [
    "0",
    "1",
    "-1",
    "0x0",
    "0xbfff",
    "0xc000",
    "0xffff",
    "0xffffff",
    "0x1000000",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "255",
    "256",
    "0xFFFFFFFFFFFFFFFF",
];

/// Fragments of the two formats, inserted anywhere.
const FRAGMENTS: [&str; 14] = [
    "Unicast lids [",
    "]",
    " of switch ",
    "Lid ",
    " guid ",
    "0x",
    " # ",
    "\n",
    "(",
    "'",
    "-",
    " lids dumped",
    "0x0002c90000000000",
    "\u{fffd}é",
];

#[path = "../../fabric-topology/tests/support/mutate.rs"]
mod mutate;
use mutate::{cases, mutate, mutations};

fn fabric() -> Fabric {
    ibnet::parse(TOPOLOGY, "pgft.topo").expect("seed topology").fabric
}

/// Lines of `text` as the readers number them.
fn line_count(text: &str) -> usize {
    text.lines().count()
}

fn dump_error_line(e: &LftDumpError) -> (&str, usize) {
    match e {
        LftDumpError::Parse { file, line, .. }
        | LftDumpError::UnknownSwitch { file, line, .. }
        | LftDumpError::PortOutOfRange { file, line, .. }
        | LftDumpError::LidOutOfRange { file, line, .. } => (file, *line),
    }
}

/// The dump reader's contract on any text.
fn check_dump(text: &str, f: &Fabric) -> Result<(), TestCaseError> {
    let n = line_count(text);
    match parse_opensm_lfts(text, "d") {
        Err(e) => {
            let (file, line) = dump_error_line(&e);
            prop_assert_eq!(file, "d");
            prop_assert!(line >= 1 && line <= n, "line {} of {}: {}", line, n, e);
            prop_assert!(e.to_string().starts_with(&format!("d:{line}: ")), "{}", e);
        }
        Ok(p) => {
            // Bounded by the caller's highest LID: never allocates what a header claims.
            match p.to_lfts(f, IB_MAX_UNICAST_LID) {
                Err(e) => {
                    let (file, line) = dump_error_line(&e);
                    prop_assert_eq!(file, "d");
                    prop_assert!(line >= 1 && line <= n, "line {} of {}: {}", line, n, e);
                }
                Ok(l) => prop_assert!(l.row_len() <= IB_MAX_UNICAST_LID as usize + 1),
            }
        }
    }
    Ok(())
}

/// The `guid2lid` reader's contract on any text; valid input round-trips.
fn check_guid2lid(text: &str) -> Result<(), TestCaseError> {
    match Guid2Lid::parse(text, "g") {
        Err(LidError::Parse { file, line, message }) => {
            prop_assert_eq!(file.as_str(), "g");
            prop_assert!(
                line >= 1 && line <= line_count(text),
                "line {} of {}",
                line,
                line_count(text)
            );
            prop_assert!(!message.is_empty());
        }
        Err(e) => prop_assert!(false, "the reader returned a non-parse error: {}", e),
        Ok(g) => {
            let out = g.to_text();
            let back = Guid2Lid::parse(&out, "g2").expect("written text reads back");
            prop_assert_eq!(&back, &g);
            prop_assert_eq!(back.to_text(), out);
        }
    }
    Ok(())
}

#[test]
fn seeds_are_valid_and_round_trip() {
    let f = fabric();
    for (i, g) in GUID2LIDS.iter().enumerate() {
        let rec = Guid2Lid::parse(g, "seed").unwrap();
        assert_eq!(&rec.to_text(), g, "seed {i} is canonical");
        let dump = parse_opensm_lfts(DUMPS[i], "seed").unwrap();
        let lfts = dump.to_lfts(&f, IB_MAX_UNICAST_LID).unwrap();
        let lmc = if i == 0 { 1 } else { 0 };
        let plan = assign_lids(&f, &rec, lmc, IB_MAX_UNICAST_LID).unwrap();
        assert_eq!(Guid2Lid::from_plan(&f, &plan), rec, "the plan keeps every recorded LID");
        let text = write_opensm_lfts(&f, &plan, &lfts);
        assert_eq!(text, DUMPS[i], "seed {i}: write(parse(dump)) is the dump");
    }
    assert!(parse_opensm_lfts(DUMPS[2], "seed").is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(1024), ..ProptestConfig::default() })]

    #[test]
    fn lft_dump_arbitrary_text_never_panics(text in any::<String>()) {
        check_dump(&text, &fabric())?;
    }

    #[test]
    fn lft_dump_mutated_seeds_never_panic(seed in 0..DUMPS.len(), muts in mutations()) {
        check_dump(&mutate(DUMPS[seed], &muts), &fabric())?;
    }

    #[test]
    fn guid2lid_arbitrary_text_never_panics(text in any::<String>()) {
        check_guid2lid(&text)?;
    }

    #[test]
    fn guid2lid_mutated_seeds_never_panic(seed in 0..GUID2LIDS.len(), muts in mutations()) {
        check_guid2lid(&mutate(GUID2LIDS[seed], &muts))?;
    }

    /// Structure-aware: random records (distinct GUIDs, disjoint ranges anywhere in 24 bits)
    /// write and read back.
    #[test]
    fn guid2lid_random_records_round_trip(
        recs in prop::collection::btree_map(any::<u64>(), (1u32..0xFF_0000, 0u32..2), 0..40)
    ) {
        let mut g = Guid2Lid::new();
        let mut used = std::collections::HashSet::new();
        for (guid, (lo, width)) in recs {
            if used.contains(&lo) || used.contains(&(lo + width)) {
                continue;
            }
            used.insert(lo);
            used.insert(lo + width);
            g.insert(guid, lo, lo + width);
        }
        let back = Guid2Lid::parse(&g.to_text(), "g").expect("reads back");
        prop_assert_eq!(back, g);
    }

    /// Structure-aware: random tables on the seed fabric (ports in range or no route) write
    /// and read back to the same bytes.
    #[test]
    fn lft_dump_random_tables_round_trip(ports in prop::collection::vec(any::<u8>(), 64)) {
        let f = fabric();
        let rec = Guid2Lid::parse(GUID2LIDS[0], "seed").unwrap();
        let plan = assign_lids(&f, &rec, 1, IB_MAX_UNICAST_LID).unwrap();
        let top = plan.top();
        let mut lfts = Lfts::new(f.num_switches(), top);
        let mut k = 0;
        for s in 0..f.num_switches() {
            let nports = f.switch(SwitchId(s as u32)).nports;
            for lid in 1..=top {
                let p = ports[k % ports.len()];
                k += 1;
                let port = if p % 5 == 0 { NO_ROUTE } else { p % (nports + 1) };
                lfts.set(SwitchId(s as u32), lid, port);
            }
        }
        let text = write_opensm_lfts(&f, &plan, &lfts);
        let back = parse_opensm_lfts(&text, "w").unwrap().to_lfts(&f, IB_MAX_UNICAST_LID).unwrap();
        prop_assert_eq!(back, lfts);
    }
}
