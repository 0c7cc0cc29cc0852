//! The VLCap of each simulated switch (`--vl-cap`, `--vl-cap-of GUID=N`): the data VLs its
//! ports can operate, reported in `Describe` (`SwitchInfo.vl_cap`) and enforced by
//! `SetSlToVl` (a table using a VL at or above it is refused). Default 8 (VL0-7, BXI-class
//! hardware); never below `--vls` (the VLs the ports operate by default, where the `oob`
//! driver puts its escape VL).

use fabric_topology::{fmt_guid, parse_guid, Fabric, Guid};

use super::SimError;

/// Highest VLCap (VL0-14; VL 15 carries management only).
const MAX_VL_CAP: u8 = 15;

/// The VLCap of every switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VlCaps {
    default: u8,
    of: Vec<(Guid, u8)>,
}

impl VlCaps {
    /// From `--vl-cap` (`default`, raised to `vls`) and the `--vl-cap-of GUID=N` entries; every
    /// GUID must be a switch of `cabling` and every N in `vls..=15`.
    pub(super) fn parse(default: u8, vls: u8, entries: &[String], cabling: &Fabric) -> Result<VlCaps, SimError> {
        let mut of = Vec::with_capacity(entries.len());
        for e in entries {
            let bad = |why: String| SimError::Topology(format!("--vl-cap-of {e}: {why}"));
            let (g, n) = e.split_once('=').ok_or_else(|| bad("expected GUID=N".to_string()))?;
            let guid = parse_guid(g.trim()).ok_or_else(|| bad(format!("{g:?} is not a GUID")))?;
            if cabling.switch_by_guid(guid).is_none() {
                return Err(bad(format!("no switch {} in the topology", fmt_guid(guid))));
            }
            let n: u8 = n
                .trim()
                .parse()
                .map_err(|_| bad(format!("{n:?} is not a number of VLs")))?;
            if !(vls..=MAX_VL_CAP).contains(&n) {
                return Err(bad(format!(
                    "{n} data VLs is not in {vls}..={MAX_VL_CAP} (--vls {vls})"
                )));
            }
            of.push((guid, n));
        }
        Ok(VlCaps {
            default: default.max(vls),
            of,
        })
    }

    /// VLCap of switch `guid`.
    pub(super) fn of(&self, guid: Guid) -> u8 {
        self.of
            .iter()
            .rev()
            .find(|(g, _)| *g == guid)
            .map_or(self.default, |&(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric() -> Fabric {
        fabric_topology::gen::generate_str("PGFT(2;2,2;1,2;1,1)", None).unwrap()
    }

    #[test]
    fn default_override_and_errors() {
        let f = fabric();
        let g0 = f.switches()[0].guid;
        let g1 = f.switches()[1].guid;
        let c = VlCaps::parse(8, 2, &[format!("{g1:#x}=4")], &f).unwrap();
        assert_eq!((c.of(g0), c.of(g1)), (8, 4));
        // Raised to --vls.
        let c = VlCaps::parse(1, 4, &[], &f).unwrap();
        assert_eq!(c.of(g0), 4);
        for (e, why) in [
            (format!("{g1:x}"), "expected GUID=N"),
            ("zz=4".to_string(), "is not a GUID"),
            ("0x1234=4".to_string(), "no switch 0x0000000000001234"),
            (format!("{g1:#x}=x"), "is not a number"),
            (format!("{g1:#x}=16"), "16 data VLs is not in 2..=15"),
            (format!("{g1:#x}=1"), "1 data VLs is not in 2..=15"),
        ] {
            let err = VlCaps::parse(8, 2, std::slice::from_ref(&e), &f)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why) && err.contains("--vl-cap-of"), "{e}: {err}");
        }
    }
}
