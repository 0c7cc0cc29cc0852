//! Writing a row of the load-aware fill: runs, one-period tables and eq. 4.8's position.

use fabric_topology::{Lid, PortNum};

/// `port` at every LID of `lids`, which are `lids[0] + step·i` when `step > 0` (then none is
/// 0, [`LeafSpan::step`](crate::fill::LeafSpan::step)).
#[inline]
pub(super) fn put_run(row: &mut [u8], lids: &[Lid], step: usize, port: PortNum) {
    match step {
        0 => lids.iter().for_each(|&lid| put(row, lid, port)),
        1 => {
            let a = lids[0] as usize;
            row[a..a + lids.len()].fill(port);
        }
        _ => row[lids[0] as usize..]
            .iter_mut()
            .step_by(step)
            .take(lids.len())
            .for_each(|x| *x = port),
    }
}

/// `table[(di + i) mod #table]` at the `i`-th LID of `lids` (`step` as in [`put_run`]).
#[inline]
pub(super) fn put_table(row: &mut [u8], lids: &[Lid], step: usize, table: &[PortNum], mut di: usize) {
    let n = table.len();
    if step == 1 {
        let (mut a, mut left) = (lids[0] as usize, lids.len());
        while left > 0 {
            let c = left.min(n - di);
            row[a..a + c].copy_from_slice(&table[di..di + c]);
            (a, left, di) = (a + c, left - c, di + c);
            if di == n {
                di = 0;
            }
        }
        return;
    }
    let mut put1 = |x: &mut u8| {
        *x = table[di];
        di += 1;
        if di == n {
            di = 0;
        }
    };
    if step == 0 {
        for &lid in lids {
            if lid != 0 {
                put1(&mut row[lid as usize]);
            } else {
                put1(&mut 0);
            }
        }
    } else {
        row[lids[0] as usize..]
            .iter_mut()
            .step_by(step)
            .take(lids.len())
            .for_each(put1);
    }
}

#[inline]
pub(super) fn put(row: &mut [u8], lid: Lid, port: PortNum) {
    if lid != 0 {
        row[lid as usize] = port;
    }
}

/// Advances eq. 4.8's position by one destination on a span with divider `dd` (0: not
/// tabulated): `rem` destinations into the current quotient `q2`, whose phase `ph` cycles
/// modulo `lcm`.
#[inline]
pub(super) fn next_destination(dd: u32, lcm: u32, rem: &mut u32, q2: &mut u32, ph: &mut u32) {
    if dd == 0 {
        return;
    }
    *rem += 1;
    if *rem == dd {
        *rem = 0;
        *q2 += 1;
        *ph += 1;
        if *ph == lcm {
            *ph = 0;
        }
    }
}

#[inline]
pub(super) fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
