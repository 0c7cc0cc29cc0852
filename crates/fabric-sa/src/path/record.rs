//! The path module's view of the records module's PathRecord (IBA 15.2.5.16) and
//! MultiPathRecord (15.2.5.20): component masks as bit masks, and a MultiPathRecord request
//! read as a PathRecord template with its GIDs.

use crate::records::multi_path::{MultiPathError, MultiPathRecord};
use crate::records::path::PathRecord;
use crate::records::Gid;

/// PathRecord component-mask bits (IBA table 203; OpenSM `IB_PR_COMPMASK_*`). Bits 0 and 1
/// (ServiceID) select no path and are not read.
pub mod pr_mask {
    pub const DGID: u64 = 1 << 2;
    pub const SGID: u64 = 1 << 3;
    pub const DLID: u64 = 1 << 4;
    pub const SLID: u64 = 1 << 5;
    pub const RAW_TRAFFIC: u64 = 1 << 6;
    pub const FLOW_LABEL: u64 = 1 << 8;
    pub const HOP_LIMIT: u64 = 1 << 9;
    pub const TCLASS: u64 = 1 << 10;
    pub const REVERSIBLE: u64 = 1 << 11;
    pub const NUMB_PATH: u64 = 1 << 12;
    pub const PKEY: u64 = 1 << 13;
    pub const QOS_CLASS: u64 = 1 << 14;
    pub const SL: u64 = 1 << 15;
    pub const MTU_SELECTOR: u64 = 1 << 16;
    pub const MTU: u64 = 1 << 17;
    pub const RATE_SELECTOR: u64 = 1 << 18;
    pub const RATE: u64 = 1 << 19;
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 20;
    pub const PKT_LIFE: u64 = 1 << 21;
    pub const PREFERENCE: u64 = 1 << 22;
}

/// MultiPathRecord component-mask bits (IBA table 213; OpenSM `IB_MPR_COMPMASK_*`).
pub mod mpr_mask {
    pub const RAW_TRAFFIC: u64 = 1 << 0;
    pub const FLOW_LABEL: u64 = 1 << 2;
    pub const HOP_LIMIT: u64 = 1 << 3;
    pub const TCLASS: u64 = 1 << 4;
    pub const REVERSIBLE: u64 = 1 << 5;
    pub const NUMB_PATH: u64 = 1 << 6;
    pub const PKEY: u64 = 1 << 7;
    pub const QOS_CLASS: u64 = 1 << 8;
    pub const SL: u64 = 1 << 9;
    pub const MTU_SELECTOR: u64 = 1 << 10;
    pub const MTU: u64 = 1 << 11;
    pub const RATE_SELECTOR: u64 = 1 << 12;
    pub const RATE: u64 = 1 << 13;
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 14;
    pub const PKT_LIFE: u64 = 1 << 15;
    pub const SGID_COUNT: u64 = 1 << 19;
    pub const DGID_COUNT: u64 = 1 << 20;
}

/// A MultiPathRecord request: the PathRecord-like template fields (as a [`PathRecord`] with
/// a PathRecord component mask) and the GIDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiPathRequest {
    pub template: PathRecord,
    /// The template's component mask, translated to PathRecord bits.
    pub pr_mask: u64,
    pub sgids: Vec<Gid>,
    pub dgids: Vec<Gid>,
}

/// Why a MultiPathRecord request is invalid (ERR_REQ_INVALID).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultiPathRequestError {
    #[error(transparent)]
    Image(#[from] MultiPathError),
    #[error("MultiPathRecord without SGIDCount/DGIDCount in the component mask or with a zero count (SGIDCount {sgids}, DGIDCount {dgids})")]
    NoGids { sgids: usize, dgids: usize },
}

impl MultiPathRequest {
    /// Reads a MultiPathRecord request (`b`: the whole, reassembled SA data) under `mask`.
    pub fn decode(b: &[u8], mask: u64) -> Result<MultiPathRequest, MultiPathRequestError> {
        let r = MultiPathRecord::decode_request(b)?;
        let template = r.path_template();
        const MAP: [(u64, u64); 15] = [
            (mpr_mask::RAW_TRAFFIC, pr_mask::RAW_TRAFFIC),
            (mpr_mask::FLOW_LABEL, pr_mask::FLOW_LABEL),
            (mpr_mask::HOP_LIMIT, pr_mask::HOP_LIMIT),
            (mpr_mask::TCLASS, pr_mask::TCLASS),
            (mpr_mask::REVERSIBLE, pr_mask::REVERSIBLE),
            (mpr_mask::NUMB_PATH, pr_mask::NUMB_PATH),
            (mpr_mask::PKEY, pr_mask::PKEY),
            (mpr_mask::QOS_CLASS, pr_mask::QOS_CLASS),
            (mpr_mask::SL, pr_mask::SL),
            (mpr_mask::MTU_SELECTOR, pr_mask::MTU_SELECTOR),
            (mpr_mask::MTU, pr_mask::MTU),
            (mpr_mask::RATE_SELECTOR, pr_mask::RATE_SELECTOR),
            (mpr_mask::RATE, pr_mask::RATE),
            (mpr_mask::PKT_LIFE_SELECTOR, pr_mask::PKT_LIFE_SELECTOR),
            (mpr_mask::PKT_LIFE, pr_mask::PKT_LIFE),
        ];
        let pr_mask = MAP.iter().filter(|(m, _)| mask & m != 0).fold(0, |a, (_, p)| a | p);
        let sgids = if mask & mpr_mask::SGID_COUNT != 0 {
            r.sgids
        } else {
            Vec::new()
        };
        let dgids = if mask & mpr_mask::DGID_COUNT != 0 {
            r.dgids
        } else {
            Vec::new()
        };
        if sgids.is_empty() || dgids.is_empty() {
            return Err(MultiPathRequestError::NoGids {
                sgids: sgids.len(),
                dgids: dgids.len(),
            });
        }
        Ok(MultiPathRequest {
            template,
            pr_mask,
            sgids,
            dgids,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipath_request_reads_gids_and_translates_the_mask() {
        let mut b = vec![0u8; 24 + 3 * 16];
        b[5] = 0x82; // reversible, NumbPath 2
        b[9] = 0x01; // SL 1
        b[15] = 1;
        b[16] = 2;
        for i in 0..3 {
            b[24 + 16 * i + 15] = i as u8 + 1;
        }
        let m = mpr_mask::SGID_COUNT | mpr_mask::DGID_COUNT | mpr_mask::NUMB_PATH | mpr_mask::SL;
        let r = MultiPathRequest::decode(&b, m).unwrap();
        assert_eq!(r.pr_mask, pr_mask::NUMB_PATH | pr_mask::SL);
        assert_eq!(
            (r.template.num_path, r.template.reversible, r.template.sl),
            (2, true, 1)
        );
        assert_eq!(r.sgids.len(), 1);
        assert_eq!(r.dgids.iter().map(|g| g.0[15]).collect::<Vec<_>>(), vec![2, 3]);
        assert!(matches!(
            MultiPathRequest::decode(&b[..24 + 32], m),
            Err(MultiPathRequestError::Image(_))
        ));
        assert!(matches!(
            MultiPathRequest::decode(&b, mpr_mask::SGID_COUNT),
            Err(MultiPathRequestError::NoGids { sgids: 1, dgids: 0 })
        ));
    }
}
