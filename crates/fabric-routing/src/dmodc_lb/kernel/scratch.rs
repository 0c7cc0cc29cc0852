//! The per-thread scratch of the load-aware fill: a switch's port groups, closer masks, counts
//! and the tables of its ports by rank and by destination.

use fabric_topology::PortNum;

use super::write::gcd;
use crate::fastdiv::FastDiv;

#[derive(Default)]
pub(super) struct Scratch {
    pub(super) gports: Vec<PortNum>,
    pub(super) gmeta: Vec<(u32, u32, FastDiv)>,
    pub(super) down_mask: Vec<u64>,
    pub(super) up_mask: Vec<u64>,
    pub(super) tmp: Vec<u8>,
    pub(super) cset: Vec<u16>,
    /// Per up index: the primaries of the current mirror group given to it.
    pub(super) gload: Vec<u32>,
    /// Per up index: the primaries of every mirror group of the switch given to it.
    pub(super) cload: Vec<u32>,
    /// Per up index: its group's `gmeta`.
    pub(super) jmeta: Vec<(u32, u32, FastDiv)>,
    /// Per rank of the switch's component: its up index when usable for the current C.
    pub(super) jt: Vec<u8>,
    /// `ptab[φ·#jt + r]`: the port of rank `r` at phase `φ = ⌊d/(Π_K·M_K)⌋ mod lcm` (eq. 4.8:
    /// port `φ mod #g` of the group), `u16::MAX` where `r` is not usable; `lcm` is the least
    /// common multiple of the usable groups' sizes, 0 when above [`PTAB_MAX_LCM`] (no table).
    pub(super) ptab: Vec<u16>,
    pub(super) lcm: u32,
    /// Whether every rank of the switch's component is usable in `jt`.
    pub(super) jt_full: bool,
    /// The C (up-link mask) `jt`, `jt_full`, `ptab` and `lcm` were built for (0: none).
    pub(super) jt_for: u64,
    /// The same four of the C before (its mask first; [`Scratch::swap_ranks`]).
    pub(super) prev: (u64, Vec<u8>, bool, Vec<u16>, u32),
    /// `dtab[d mod period]`: the port of destination `d` whose first rank is the nominal one,
    /// with every rank usable ([`Scratch::build_dtab`]), followed by its first [`DTAB_TAIL`]
    /// entries again (a span of up to that many destinations is one slice of it); empty: not
    /// built for this switch yet.
    pub(super) dtab: Vec<PortNum>,
    pub(super) dtab_period: usize,
    pub(super) dtab_div: FastDiv,
    /// Whether `dtab` cannot be built for this switch (period too long, no phase divider).
    pub(super) dtab_none: bool,
    /// The destinations this switch sends up as non-primaries of the parent: (parent
    /// position, destination), for the parent's arrivals ([`super::Balance::Arrivals`]).
    pub(super) rec: Vec<(u32, u32)>,
    /// [`Balance::Arrivals`]: the fair share of an up-link (primaries and arrivals).
    pub(super) cap: u32,
    /// The spans of the switch-wide walk ([`super::Ctx::switch_prepass`]): (span index, mirror,
    /// [`NONE`] without targets), and before each of them and at the end the per-up-index
    /// count of the primaries so far, `pref[v·#ups..(v + 1)·#ups]`.
    pub(super) pvis: Vec<(u32, u32)>,
    pub(super) pref: Vec<u32>,
}

/// How many entries of [`Scratch::dtab`] follow its period again.
const DTAB_TAIL: usize = 64;

/// The longest period of `d` tabulated by [`Scratch::build_dtab`].
const DTAB_MAX: u64 = 4096;

/// The largest phase count tabulated by [`Scratch::build_ptab`].
const PTAB_MAX_LCM: u32 = 16;

impl Scratch {
    /// Builds `ptab` and `lcm` from `jt` and `jmeta`.
    pub(super) fn build_ptab(&mut self) {
        let mut l = 1u32;
        for &j in &self.jt {
            if j != u8::MAX {
                let len = self.jmeta[usize::from(j)].1.max(1);
                l = l / gcd(l, len) * len;
                if l > PTAB_MAX_LCM {
                    self.lcm = 0;
                    self.ptab.clear();
                    return;
                }
            }
        }
        self.lcm = l;
        self.ptab.clear();
        for ph in 0..l {
            for &j in &self.jt {
                self.ptab.push(if j == u8::MAX {
                    u16::MAX
                } else {
                    let (start, len, _) = self.jmeta[usize::from(j)];
                    u16::from(self.gports[(start + ph % len.max(1)) as usize])
                });
            }
        }
    }
}

impl Scratch {
    /// Exchanges the rank tables of the current C with those of the previous one.
    pub(super) fn swap_ranks(&mut self) {
        std::mem::swap(&mut self.jt_for, &mut self.prev.0);
        std::mem::swap(&mut self.jt, &mut self.prev.1);
        std::mem::swap(&mut self.jt_full, &mut self.prev.2);
        std::mem::swap(&mut self.ptab, &mut self.prev.3);
        std::mem::swap(&mut self.lcm, &mut self.prev.4);
    }

    /// Builds `dtab` for a switch of nominal divider `pi` (`Π_K`), `ranks` ([`Plan::up_row`])
    /// and phase divider `dd = Π_K·M_K` from `jmeta`/`gports`: the port of `d` is rank
    /// `⌊d/Π_K⌋ mod M_K`'s group at port `⌊d/dd⌋ mod #g` (eq. 4.8), periodic in `d` with period
    /// `dd · lcm(#g)`. Sets `dtab_none` when that period is longer than [`DTAB_MAX`].
    pub(super) fn build_dtab(&mut self, pi: u64, ranks: &[u8], dd: u32) {
        let mut l = 1u64;
        for &j in ranks {
            let len = u64::from(self.jmeta[usize::from(j)].1.max(1));
            l = l / u64::from(gcd(l as u32, len as u32)) * len;
            if l.saturating_mul(u64::from(dd)) > DTAB_MAX {
                self.dtab_none = true;
                return;
            }
        }
        let period = l * u64::from(dd);
        let mm = ranks.len() as u64;
        self.dtab.clear();
        self.dtab.extend((0..period).map(|d| {
            let (start, len, _) = self.jmeta[usize::from(ranks[((d / pi) % mm) as usize])];
            self.gports[(start + ((d / u64::from(dd)) % u64::from(len.max(1))) as u32) as usize]
        }));
        self.dtab_div = FastDiv::new(period as u32);
        self.dtab_period = period as usize;
        for i in 0..DTAB_TAIL {
            self.dtab.push(self.dtab[i % self.dtab_period]);
        }
    }
}

impl Scratch {
    /// `gload`: the primaries of the mirror group `m` starting at span `si`, from the
    /// switch-wide walk ([`super::Ctx::switch_prepass`]: the spans from `si` on while they have
    /// targets at mirror `m`, what [`super::Ctx::group_prepass`] counts).
    pub(super) fn group_load(&mut self, si: usize, m: u32) {
        let nu = self.gload.len();
        let v0 = self.pvis.partition_point(|x| (x.0 as usize) < si);
        debug_assert_eq!(self.pvis.get(v0).map(|x| x.0 as usize), Some(si));
        let v1 = v0 + self.pvis[v0..].iter().take_while(|x| x.1 == m).count();
        let (a, b) = (&self.pref[v0 * nu..(v0 + 1) * nu], &self.pref[v1 * nu..(v1 + 1) * nu]);
        for ((g, &x), &y) in self.gload.iter_mut().zip(a).zip(b) {
            *g = y - x;
        }
    }
}
