//! DFSSSP's cycle breaking (IPDPS 2011 §IV-B) and OpenSM's balancing of the spare layers.

use super::routes::Routes;

/// Moves routes to higher layers until every layer's CDG is acyclic; returns the number of
/// layers needed (0 when there are no routes). `layer` starts all 0.
pub(super) fn break_cycles(r: &Routes, layer: &mut [u8]) -> usize {
    if r.len() == 0 {
        return 0;
    }
    let ne = r.efrom.len();
    let n = r.nchan;
    // Out-edges per channel (CSR by source channel, edges in id order).
    let mut ostart = vec![0u32; n + 1];
    for &a in &r.efrom {
        ostart[a as usize + 1] += 1;
    }
    for i in 0..n {
        ostart[i + 1] += ostart[i];
    }
    let mut fill = ostart.clone();
    let mut oedge = vec![0u32; ne];
    for (e, &a) in r.efrom.iter().enumerate() {
        oedge[fill[a as usize] as usize] = e as u32;
        fill[a as usize] += 1;
    }
    // Routes of the current layer inducing each edge, and of the next layer (filled as routes
    // move up, so no pass over all routes per layer).
    let mut cnt = vec![0u32; ne];
    for &e in &r.dep {
        cnt[e as usize] += 1;
    }
    let mut cnt_next = vec![0u32; ne];
    let mut in_layer = r.len();
    let mut color = vec![0u8; n];
    // Stack index of each channel on the DFS stack (valid while it is grey).
    let mut pos = vec![0u32; n];
    // DFS frames: (channel, next out-edge index, edge taken to reach the next frame).
    let mut stack: Vec<(u32, u32, u32)> = Vec::new();
    let mut cur: u8 = 0;
    loop {
        if in_layer == 0 {
            return cur as usize;
        }
        let mut moved = 0;
        color.iter_mut().for_each(|c| *c = 0);
        for root in 0..n as u32 {
            if color[root as usize] != 0 {
                continue;
            }
            stack.clear();
            stack.push((root, ostart[root as usize], u32::MAX));
            color[root as usize] = 1;
            pos[root as usize] = 0;
            while let Some(top) = stack.last_mut() {
                let (c, ref mut next, _) = *top;
                if *next == ostart[c as usize + 1] {
                    color[c as usize] = 2;
                    stack.pop();
                    continue;
                }
                let e = oedge[*next as usize];
                *next += 1;
                if cnt[e as usize] == 0 {
                    continue;
                }
                let v = r.eto[e as usize];
                match color[v as usize] {
                    0 => {
                        top.2 = e;
                        color[v as usize] = 1;
                        pos[v as usize] = stack.len() as u32;
                        stack.push((v, ostart[v as usize], u32::MAX));
                    }
                    1 => {
                        // Cycle: the frames from v to the top, closed by e.
                        let from = pos[v as usize] as usize;
                        let top = stack.len() - 1;
                        let mut weakest = e;
                        for f in &stack[from..top] {
                            if cnt[f.2 as usize] < cnt[weakest as usize] {
                                weakest = f.2;
                            }
                        }
                        // Move every route of this layer inducing it to the next layer. The
                        // edges of the stack below its top all had routes before; note the
                        // lowest frame whose edge to the next frame loses its last one.
                        let mut cut = usize::MAX;
                        for &ri in r.routes_of(weakest as usize) {
                            let ri = ri as usize;
                            if layer[ri] == cur {
                                layer[ri] = cur + 1;
                                moved += 1;
                                for &d in r.deps(ri) {
                                    let d = d as usize;
                                    cnt[d] -= 1;
                                    cnt_next[d] += 1;
                                    if cnt[d] == 0 {
                                        let a = r.efrom[d] as usize;
                                        let i = pos[a] as usize;
                                        if color[a] == 1 && i < top && stack[i].2 as usize == d {
                                            cut = cut.min(i);
                                        }
                                    }
                                }
                            }
                        }
                        // Removing edges creates no cycle: finished channels stay finished.
                        // The stack stays a path up to its first frame whose edge to the
                        // next frame is gone; the frames above it are explored again later.
                        if cut != usize::MAX {
                            for f in &stack[cut + 1..] {
                                color[f.0 as usize] = 0;
                            }
                            stack.truncate(cut + 1);
                        }
                        continue;
                    }
                    _ => {}
                }
            }
        }
        std::mem::swap(&mut cnt, &mut cnt_next);
        cnt_next.fill(0);
        in_layer = moved;
        cur += 1;
    }
}

/// OpenSM dfsssp's balancing: the `max - needed` spare layers go one by one to the layer with
/// the most routes per layer given so far; a layer given `k` layers spreads its routes over `k`
/// consecutive layers (greedy by route weight). Returns the number of layers used.
pub(super) fn balance(r: &Routes, layer: &mut [u8], needed: usize, max: usize) -> usize {
    if needed == 0 || needed >= max {
        return needed;
    }
    let mut paths = vec![0u64; needed];
    for &l in layer.iter() {
        paths[l as usize] += 1;
    }
    let mut split = vec![1u64; needed];
    for _ in needed..max {
        let mut best = 0;
        for l in 1..needed {
            // Most paths per layer (ties: the lower layer), compared exactly.
            if paths[l] * split[best] > paths[best] * split[l] {
                best = l;
            }
        }
        split[best] += 1;
    }
    let mut base = vec![0u8; needed];
    for l in 1..needed {
        base[l] = base[l - 1] + split[l - 1] as u8;
    }
    // Per original layer, the weight given to each of its sub-layers so far.
    let mut load: Vec<Vec<u64>> = split.iter().map(|&k| vec![0u64; k as usize]).collect();
    for (i, l) in layer.iter_mut().enumerate() {
        let o = *l as usize;
        let sub = (0..load[o].len()).min_by_key(|&j| (load[o][j], j)).unwrap_or(0);
        load[o][sub] += u64::from(r.weight[i]);
        *l = base[o] + sub as u8;
    }
    max
}
