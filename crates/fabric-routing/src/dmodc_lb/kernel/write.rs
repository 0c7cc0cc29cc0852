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

/// `table[(di + i) mod n]` at the `i`-th LID of `lids` (`step` as in [`put_run`]), with `table`
/// one period `n` of the ports followed by its first entries again (`table[n + i] =
/// table[i]`): a slice of it covers the LIDs at once when they are consecutive and few enough.
#[inline]
pub(super) fn put_table(row: &mut [u8], lids: &[Lid], step: usize, (table, n): (&[PortNum], usize), mut di: usize) {
    if step == 1 {
        let (mut a, mut left) = (lids[0] as usize, lids.len());
        if di + left <= table.len() {
            row[a..a + left].copy_from_slice(&table[di..di + left]);
            return;
        }
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

/// `prow[ts[i]]` at the `i`-th LID of `lids` (`step` as in [`put_run`]) up to the first `i`
/// whose rank has no port (`u16::MAX`, or beyond `prow`); returns how many were written.
#[inline]
pub(super) fn put_ranks(row: &mut [u8], lids: &[Lid], step: usize, ts: &[u16], prow: &[u16]) -> usize {
    let port = |t: u16| prow.get(usize::from(t)).copied().unwrap_or(u16::MAX);
    if step == 1 && !ts.is_empty() {
        // Consecutive LIDs: no LID to read, none is 0.
        let a = lids[0] as usize;
        for (i, (x, &t)) in row[a..a + ts.len()].iter_mut().zip(ts).enumerate() {
            let e = port(t);
            if e == u16::MAX {
                return i;
            }
            *x = e as PortNum;
        }
        return ts.len();
    }
    let mut n = 0;
    for (&lid, &t) in lids.iter().zip(ts) {
        let e = port(t);
        if e == u16::MAX {
            break;
        }
        put(row, lid, e as PortNum);
        n += 1;
    }
    n
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

#[cfg(test)]
mod tests {
    use super::{put, put_ranks, put_table};
    use fabric_topology::Lid;

    /// LIDs `a, a + step, …` (step 0: the same run, read one by one).
    fn lids(a: Lid, n: usize, step: usize) -> Vec<Lid> {
        (0..n).map(|i| a + (i * step.max(1)) as Lid).collect()
    }

    /// A table with its repeated head writes what the cyclic reading of one period does,
    /// whatever the start, the length and the LID step.
    #[test]
    fn put_table_reads_the_period_cyclically() {
        let period: Vec<u8> = (1..=7).collect();
        let mut table = period.clone();
        table.extend((0..5).map(|i| period[i % 7]));
        for step in 0..3 {
            for di in 0..7 {
                for n in 1..20 {
                    let l = lids(3, n, step);
                    let (mut a, mut b) = (vec![0u8; 64], vec![0u8; 64]);
                    put_table(&mut a, &l, step, (&table, 7), di);
                    for (i, &lid) in l.iter().enumerate() {
                        put(&mut b, lid, period[(di + i) % 7]);
                    }
                    assert_eq!(a, b, "step {step} di {di} n {n}");
                }
            }
        }
    }

    /// Ranks with a port are written up to the first one without (none, or beyond the row),
    /// and the count says where that is.
    #[test]
    fn put_ranks_stops_at_the_first_rank_without_a_port() {
        let prow = [5u16, u16::MAX, 7, 9];
        for ts in [vec![0u16, 2, 3, 0], vec![0, 2, 1, 3], vec![3, 9, 0], vec![1, 0], vec![]] {
            let want = ts
                .iter()
                .position(|&t| prow.get(usize::from(t)).is_none_or(|&e| e == u16::MAX))
                .unwrap_or(ts.len());
            for step in [0usize, 1, 2] {
                let l = lids(4, ts.len(), step);
                let mut a = vec![0u8; 32];
                assert_eq!(put_ranks(&mut a, &l, step, &ts, &prow), want, "{ts:?} step {step}");
                let mut b = vec![0u8; 32];
                for (&lid, &t) in l.iter().zip(&ts).take(want) {
                    put(&mut b, lid, prow[usize::from(t)] as u8);
                }
                assert_eq!(a, b, "{ts:?} step {step}");
            }
        }
    }
}
