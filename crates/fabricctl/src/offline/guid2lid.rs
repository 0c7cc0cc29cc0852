//! LID plans read from `guid2lid` files (`route|analyze --guid2lid`): the records checked
//! against the highest usable LID, and a recorded plan taken as is.

use std::path::Path;

use anyhow::{bail, Context, Result};
use fabric_routing::{Guid2Lid, LidPlan};
use fabric_topology::{fmt_guid, Fabric};

use super::read_small;

/// Reads a `guid2lid` file whose LIDs must fit `max_lid`: a record above it is an error (LID
/// assignment would drop it and move its port's address without a word).
pub(super) fn read_guid2lid(path: &Path, max_lid: u32) -> Result<Guid2Lid> {
    let text = read_small(path)?;
    let g = Guid2Lid::parse(&text, &path.display().to_string())?;
    if let Some(&(guid, lo, hi)) = g.above(max_lid).first() {
        bail!(
            "{}: {} has LIDs {lo:#06x}..{hi:#06x}, above the highest usable LID {max_lid:#06x} (--max-lid)",
            path.display(),
            fmt_guid(guid)
        );
    }
    Ok(g)
}

/// The LID plan recorded in a `guid2lid` file, taken as is (no LID is assigned or moved).
///
/// Every switch and every end port of `f` must have a record (switches by node GUID, end ports
/// by port GUID); all end-port ranges must be `2^lmc` wide with the same LMC (0..=7), aligned to
/// `2^lmc`; no LID may be used twice or exceed `max_lid`. `source` names the file in errors.
pub(crate) fn plan_from_guid2lid(f: &Fabric, g: &Guid2Lid, source: &str, max_lid: u32) -> Result<LidPlan> {
    let mut used: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    let mut claim = |lo: u32, hi: u32, who: String| -> Result<()> {
        if hi > max_lid {
            bail!("{source}: {who} has LID {hi:#06x}, above the highest usable LID {max_lid:#06x}");
        }
        for lid in lo..=hi {
            if let Some(prev) = used.insert(lid, who.clone()) {
                bail!("{source}: LID {lid:#06x} is recorded for both {prev} and {who}");
            }
        }
        Ok(())
    };
    let mut lmc: Option<(u8, String)> = None;
    let mut end_port_base = Vec::with_capacity(f.num_end_ports());
    for e in f.end_ports() {
        let who = format!("end port {} ('{}')", fmt_guid(e.port_guid), e.desc);
        let (lo, hi) = g
            .get(e.port_guid)
            .with_context(|| format!("{source}: no LID recorded for {who}"))?;
        let n = hi - lo + 1;
        let this = match n.is_power_of_two() && n <= 128 {
            true => n.trailing_zeros() as u8,
            false => bail!("{source}: {who} has {n} LIDs; an LMC range has 2^LMC LIDs (LMC 0..=7)"),
        };
        match &lmc {
            None => lmc = Some((this, who.clone())),
            Some((l, first)) if *l != this => {
                bail!("{source}: {who} has LMC {this} but {first} has LMC {l}")
            }
            Some(_) => {}
        }
        if this >= 1 && lo % n != 0 {
            bail!("{source}: {who} has an unaligned LID range {lo:#06x}..{hi:#06x} (LMC {this})");
        }
        claim(lo, hi, who)?;
        end_port_base.push(lo);
    }
    let mut switch_lid = Vec::with_capacity(f.num_switches());
    for s in f.switches() {
        let who = format!("switch {} ('{}')", fmt_guid(s.guid), s.desc);
        let (lo, _) = g
            .get(s.guid)
            .with_context(|| format!("{source}: no LID recorded for {who}"))?;
        claim(lo, lo, who)?;
        switch_lid.push(lo);
    }
    Ok(LidPlan {
        lmc: lmc.map_or(0, |(l, _)| l),
        max_lid,
        switch_lid,
        end_port_base,
    })
}
