//! Property: a selective query answers exactly the records of the whole table that match the
//! template under the mask (so the LID/GUID shortcuts of `query` agree with a full scan), and
//! a record used as its own template is always found.

mod records_fixture;

use fabric_sa::records::*;
use fabric_sa::wire::{self, status};
use fabric_sa::SaService;
use proptest::prelude::*;
use records_fixture::*;

fn table<R: Record>(sa: &SaService, attr_mod: u32, mask: u64, t: &[u8]) -> Vec<R> {
    let resp = ask(sa, &request(wire::METHOD_GET_TABLE, R::ATTR, attr_mod, mask, t));
    assert_eq!(resp.header.status, status::OK, "{resp:?}");
    resp.data.chunks(R::SIZE).map(|c| R::decode(c).unwrap()).collect()
}

fn image<R: Record>(r: &R) -> Vec<u8> {
    let mut b = vec![0u8; R::SIZE];
    r.encode(&mut b);
    b
}

/// A template: record `a`'s image with bytes `cut` taken from record `b`.
fn template<R: Record>(all: &[R], a: usize, b: usize, cut: (usize, usize)) -> Vec<u8> {
    let mut t = image(&all[a % all.len()]);
    let other = image(&all[b % all.len()]);
    let (x, y) = (cut.0 % R::SIZE, cut.1 % R::SIZE);
    let (lo, hi) = (x.min(y), x.max(y));
    t[lo..hi].copy_from_slice(&other[lo..hi]);
    t
}

/// Checks the query against the oracle `keep`, for a template built from the table.
fn check<R: Record + PartialEq + std::fmt::Debug>(
    sa: &SaService,
    attr_mod: u32,
    mask: u64,
    pick: (usize, usize, (usize, usize)),
    keep: impl Fn(&R, &R) -> bool,
) -> Result<(), TestCaseError> {
    let all: Vec<R> = table(sa, 0, 0, &[]);
    prop_assert!(!all.is_empty());
    let mask = mask & R::COMPONENTS;
    let t_img = template(&all, pick.0, pick.1, pick.2);
    let t = R::decode(&t_img).unwrap();
    let got: Vec<R> = table(sa, attr_mod, mask, &t_img);
    let want: Vec<&R> = all.iter().filter(|r| keep(r, &t)).collect();
    prop_assert_eq!(got.iter().collect::<Vec<_>>(), want, "{} mask {:#x}", R::NAME, mask);
    // A record is found by itself under any mask.
    let own = &all[pick.0 % all.len()];
    let found: Vec<R> = table(sa, attr_mod, mask, &image(own));
    prop_assert!(found.contains(own), "{} not found by itself, mask {:#x}", R::NAME, mask);
    Ok(())
}

fn pick() -> impl Strategy<Value = (usize, usize, (usize, usize))> {
    (any::<usize>(), any::<usize>(), (any::<usize>(), any::<usize>()))
}

fn mask() -> impl Strategy<Value = u64> {
    prop_oneof![(0u32..64).prop_map(|b| 1u64 << b), any::<u64>(), 0u64..16]
}

proptest! {
    #[test]
    fn node_records(m in mask(), p in pick()) {
        let sa = service();
        check::<NodeRecord>(&sa, 0, m, p, |r, t| {
            (m & 1 == 0 || r.lid == t.lid) && r.matches(t, m & NodeRecord::COMPONENTS)
        })?;
    }

    #[test]
    fn port_info_records(m in mask(), p in pick(), enhanced in any::<bool>()) {
        let sa = service();
        let attr_mod = if enhanced { 1 << 31 } else { 0 };
        let m = m & PortInfoRecord::COMPONENTS;
        check::<PortInfoRecord>(&sa, attr_mod, m, p, |r, t| {
            let caps = enhanced
                || ((m & 1 << 7 == 0 || r.capability_mask == t.capability_mask)
                    && (m & 1 << 53 == 0 || r.capability_mask2 == t.capability_mask2));
            // No port of the fixture has extended speeds: those components select nothing.
            caps && r.matches(t, m & !(1 << 54 | 1 << 55 | 1 << 57))
        })?;
    }

    #[test]
    fn link_records(m in mask(), p in pick()) {
        let sa = service();
        check::<LinkRecord>(&sa, 0, m, p, |r, t| r.matches(t, m & LinkRecord::COMPONENTS))?;
    }

    #[test]
    fn switch_lft_and_guid_info_records(m in mask(), p in pick()) {
        let sa = service();
        check::<SwitchInfoRecord>(&sa, 0, m, p, |r, t| r.matches(t, m & SwitchInfoRecord::COMPONENTS))?;
        check::<LftRecord>(&sa, 0, m, p, |r, t| r.matches(t, m & LftRecord::COMPONENTS))?;
        check::<GuidInfoRecord>(&sa, 0, m, p, |r, t| r.matches(t, m & GuidInfoRecord::COMPONENTS))?;
        check::<SmInfoRecord>(&sa, 0, m, p, |r, t| r.matches(t, m & SmInfoRecord::COMPONENTS))?;
    }
}

/// Every LinkRecord has its reverse.
#[test]
fn every_link_record_has_its_reverse() {
    let sa = service();
    let all: Vec<LinkRecord> = table(&sa, 0, 0, &[]);
    for l in &all {
        let back = LinkRecord {
            from_lid: l.to_lid,
            from_port_num: l.to_port_num,
            to_port_num: l.from_port_num,
            to_lid: l.from_lid,
        };
        assert!(all.contains(&back), "{l:?} has no reverse");
    }
}
