//! Splitting the LFT blocks of a generation into the two upload stages.
//!
//! An LFT block holds 64 consecutive LIDs, so with LMC 1 the base LID `2k` and the escape LID
//! `2k + 1` of an end port share a block (with LMC ≥ 2, its `2^LMC − 1` layer LIDs and its escape
//! LID, the last offset, do: every non-escape offset is a base LID in every phase). The *escape stage* (phase Prepare) writes the new
//! escape entries over the entries the switch holds for every other LID, so base traffic is not
//! touched; the *base stage* (phase Update) writes the whole new blocks.

use fabric_routing::{LftBlockDiff, Lfts, LidPlan, BLOCK_SIZE, NO_ROUTE};
use fabric_topology::Lid;

/// Which LIDs of a row are escape LIDs (the last offset `base + 2^LMC − 1` of every end port
/// with LMC ≥ 1; every other offset is a base LID).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EscapeMask {
    bits: Vec<bool>,
}

impl EscapeMask {
    /// The escape LIDs of `plan` (empty with LMC 0).
    pub fn new(plan: &LidPlan) -> EscapeMask {
        let mut bits = vec![false; plan.top() as usize + 1];
        if let Some(off) = plan.escape_offset() {
            for &b in &plan.end_port_base {
                if b == 0 {
                    continue;
                }
                if let Some(x) = bits.get_mut((b + off) as usize) {
                    *x = true;
                }
            }
        }
        EscapeMask { bits }
    }
    /// Whether `lid` is an escape LID.
    pub fn is_escape(&self, lid: Lid) -> bool {
        self.bits.get(lid as usize).copied().unwrap_or(false)
    }
    /// Number of escape LIDs.
    pub fn count(&self) -> usize {
        self.bits.iter().filter(|&&b| b).count()
    }
}

/// The two upload stages of a generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stages {
    /// Phase Prepare: new escape entries, every other entry as installed.
    pub escape: Vec<LftBlockDiff>,
    /// Phase Update: the whole new blocks not already written by the escape stage.
    pub base: Vec<LftBlockDiff>,
}

/// Splits `writes` (whole new blocks selected for upload, see `Lfts::diff`) into the escape
/// and the base stage. `installed` is what the switches hold; blocks it does not cover count as
/// all [`NO_ROUTE`]. A block whose new base entries equal the installed ones is written once, in
/// the escape stage; a block whose escape entries are unchanged is written once, in the base
/// stage.
pub fn split_writes(installed: &Lfts, writes: &[LftBlockDiff], mask: &EscapeMask) -> Stages {
    let mut st = Stages::default();
    let empty = [NO_ROUTE; BLOCK_SIZE];
    for w in writes {
        let b = w.block as usize;
        let old: &[u8] = if w.switch.idx() < installed.num_switches() && b < installed.num_blocks() {
            installed.block(w.switch, b)
        } else {
            &empty
        };
        let mut esc = [0u8; BLOCK_SIZE];
        esc.copy_from_slice(old);
        let mut escape_changed = false;
        for (i, e) in esc.iter_mut().enumerate() {
            let lid = (b * BLOCK_SIZE + i) as Lid;
            if mask.is_escape(lid) && *e != w.entries[i] {
                *e = w.entries[i];
                escape_changed = true;
            }
        }
        if escape_changed {
            st.escape.push(LftBlockDiff {
                switch: w.switch,
                block: w.block,
                entries: esc,
            });
        }
        // Forced writes (resync, dirty) whose content is unchanged go in the base stage.
        if !escape_changed || esc != w.entries {
            st.base.push(w.clone());
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_topology::SwitchId;

    fn plan(bases: &[Lid]) -> LidPlan {
        LidPlan {
            lmc: 1,
            max_lid: 0xBFFF,
            switch_lid: vec![1],
            end_port_base: bases.to_vec(),
        }
    }

    fn write(block: u32, f: impl Fn(usize) -> u8) -> LftBlockDiff {
        let mut entries = [0u8; BLOCK_SIZE];
        for (i, e) in entries.iter_mut().enumerate() {
            *e = f(i);
        }
        LftBlockDiff {
            switch: SwitchId(0),
            block,
            entries,
        }
    }

    /// End ports at LIDs 2 and 4 (escape LIDs 3 and 5) and the switch at LID 1, every one
    /// installed on port 1: the escape mask and the installed table.
    fn installed_on_port_1() -> (EscapeMask, Lfts) {
        let p = plan(&[2, 4]);
        let mut inst = Lfts::new(1, p.top());
        for lid in 1..=5 {
            inst.set(SwitchId(0), lid, 1);
        }
        (EscapeMask::new(&p), inst)
    }

    #[test]
    fn mask_marks_base_plus_one_only() {
        let m = EscapeMask::new(&plan(&[2, 4, 70]));
        assert!(m.is_escape(3) && m.is_escape(5) && m.is_escape(71));
        assert!(!m.is_escape(2) && !m.is_escape(4) && !m.is_escape(1) && !m.is_escape(70));
        assert!(!m.is_escape(10_000));
        assert_eq!(m.count(), 3);
        let mut p = plan(&[2, 4]);
        p.lmc = 0;
        assert_eq!(EscapeMask::new(&p).count(), 0);
    }

    #[test]
    fn both_changed_gives_two_writes_escape_keeps_installed_base() {
        let (m, inst) = installed_on_port_1();
        // New: every routed LID goes to port 2.
        let w = write(0, |i| if (1..=5).contains(&i) { 2 } else { NO_ROUTE });
        let st = split_writes(&inst, std::slice::from_ref(&w), &m);
        assert_eq!(st.escape.len(), 1);
        let e = &st.escape[0].entries;
        assert_eq!((e[1], e[2], e[3], e[4], e[5]), (1, 1, 2, 1, 2));
        assert_eq!(st.base, vec![w]);
    }

    #[test]
    fn only_base_changed_goes_to_base_stage_only() {
        let (m, inst) = installed_on_port_1();
        let w = write(0, |i| match i {
            2 => 3,
            1 | 3..=5 => 1,
            _ => NO_ROUTE,
        });
        let st = split_writes(&inst, std::slice::from_ref(&w), &m);
        assert!(st.escape.is_empty());
        assert_eq!(st.base, vec![w]);
    }

    #[test]
    fn only_escape_changed_is_written_once_in_escape_stage() {
        let (m, inst) = installed_on_port_1();
        let w = write(0, |i| match i {
            5 => 4,
            1..=4 => 1,
            _ => NO_ROUTE,
        });
        let st = split_writes(&inst, std::slice::from_ref(&w), &m);
        assert_eq!(st.escape, vec![w]);
        assert!(st.base.is_empty());
    }

    #[test]
    fn uncovered_installed_block_counts_as_no_route() {
        let p = plan(&[2, 64]);
        let m = EscapeMask::new(&p);
        let inst = Lfts::new(1, 5); // covers block 0 only
        let w = write(1, |i| if i <= 1 { 7 } else { NO_ROUTE });
        let st = split_writes(&inst, std::slice::from_ref(&w), &m);
        assert_eq!(st.escape.len(), 1);
        assert_eq!(
            st.escape[0].entries[0], NO_ROUTE,
            "base LID 64 untouched in the escape stage"
        );
        assert_eq!(st.escape[0].entries[1], 7);
        assert_eq!(st.base, vec![w]);
    }

    #[test]
    fn forced_identical_block_is_written_in_base_stage() {
        let p = plan(&[2]);
        let m = EscapeMask::new(&p);
        let mut inst = Lfts::new(1, p.top());
        inst.set(SwitchId(0), 3, 1);
        let w = LftBlockDiff {
            switch: SwitchId(0),
            block: 0,
            entries: inst.block(SwitchId(0), 0).try_into().expect("64 entries"),
        };
        let st = split_writes(&inst, std::slice::from_ref(&w), &m);
        assert!(st.escape.is_empty());
        assert_eq!(st.base, vec![w]);
    }
}

#[cfg(test)]
#[path = "stage_lmc_tests.rs"]
mod lmc_tests;
