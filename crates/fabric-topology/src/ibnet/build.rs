//! Pass 2: records to a [`Fabric`] (node ids resolved, links checked from both ends).

use std::collections::HashMap;

use super::error::{ParseError, Warning};
use super::lex::{NodeKind, PortLine, Record};
use crate::model::{fmt_guid, EndPortId, Fabric, FabricBuilder, NodeType, PortNum, SwitchId};

/// Where a port line's remote end says it is cabled.
enum Back {
    /// The remote port's own line points back at this port.
    Reciprocal,
    /// The remote record has no line for that port.
    Missing,
    /// The remote port's line points elsewhere (line number of that line).
    Conflict(usize),
}

struct Ctx<'r, 'a> {
    records: &'r [Record<'a>],
    file: &'r str,
    /// Record index of each port line's remote node, parallel to `records[i].ports`.
    remote_of: Vec<Vec<usize>>,
    /// Offset of each record's ports in the flat per-port tables (`nports + 1` slots per record).
    slot_base: Vec<usize>,
    /// Per (record, port): index of that port's own line in its record.
    own_line: Vec<Option<u32>>,
}

impl Ctx<'_, '_> {
    fn slot(&self, rec: usize, port: PortNum) -> usize {
        self.slot_base[rec] + port as usize
    }
    fn err(&self, line: usize, reason: String) -> ParseError {
        ParseError::new(self.file, line, reason)
    }
    fn warn(&self, warnings: &mut Vec<Warning>, line: usize, message: String) {
        warnings.push(Warning { line, message });
    }
    /// `Switch "id"[p]` for messages.
    fn name(&self, rec: usize, port: PortNum) -> String {
        let r = &self.records[rec];
        format!("{} \"{}\"[{port}]", r.kind.name(), r.id)
    }
    fn back(&self, rec: usize, pl: &PortLine<'_>, remote: usize) -> Back {
        match self.own_line[self.slot(remote, pl.remote_port)] {
            None => Back::Missing,
            Some(j) => {
                let other = &self.records[remote].ports[j as usize];
                if self.remote_of[remote][j as usize] == rec && other.remote_port == pl.local {
                    Back::Reciprocal
                } else {
                    Back::Conflict(other.line)
                }
            }
        }
    }
    fn conflict(&self, rec: usize, pl: &PortLine<'_>, remote: usize, other_line: usize) -> ParseError {
        let j = self.own_line[self.slot(remote, pl.remote_port)].unwrap_or(0) as usize;
        let other = &self.records[remote].ports[j];
        let other_remote = self.remote_of[remote][j];
        self.err(
            pl.line,
            format!(
                "{} is cabled to {}, but line {other_line} cables {} to {}",
                self.name(rec, pl.local),
                self.name(remote, pl.remote_port),
                self.name(remote, pl.remote_port),
                self.name(other_remote, other.remote_port)
            ),
        )
    }
}

pub(super) fn build(records: &[Record<'_>], file: &str, warnings: &mut Vec<Warning>) -> Result<Fabric, ParseError> {
    // Node ids.
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        if let Some(&j) = by_id.get(r.id) {
            return Err(ParseError::new(
                file,
                r.line,
                format!(
                    "duplicate node id \"{}\" (first record at line {})",
                    r.id, records[j].line
                ),
            ));
        }
        by_id.insert(r.id, i);
    }
    let mut slot_base = Vec::with_capacity(records.len());
    let mut total = 0usize;
    for r in records {
        slot_base.push(total);
        total += r.nports as usize + 1;
    }
    let mut ctx = Ctx {
        records,
        file,
        remote_of: Vec::with_capacity(records.len()),
        slot_base,
        own_line: vec![None; total],
    };

    // Resolve remote ids, check remote port ranges, index each port's own line.
    for (i, r) in records.iter().enumerate() {
        let mut rem = Vec::with_capacity(r.ports.len());
        for (j, pl) in r.ports.iter().enumerate() {
            let Some(&k) = by_id.get(pl.remote_id) else {
                return Err(ctx.err(
                    pl.line,
                    format!(
                        "unknown node \"{}\": no Switch, Ca or Rt record has this id",
                        pl.remote_id
                    ),
                ));
            };
            let rr = &records[k];
            if pl.remote_port > rr.nports {
                return Err(ctx.err(
                    pl.line,
                    format!(
                        "remote port [{}] out of range: {} \"{}\" (line {}) has {} ports",
                        pl.remote_port,
                        rr.kind.name(),
                        rr.id,
                        rr.line,
                        rr.nports
                    ),
                ));
            }
            if k == i && pl.remote_port == pl.local {
                return Err(ctx.err(pl.line, format!("port [{}] is cabled to itself", pl.local)));
            }
            let s = ctx.slot(i, pl.local);
            ctx.own_line[s] = Some(j as u32);
            rem.push(k);
        }
        ctx.remote_of.push(rem);
    }

    let mut b = FabricBuilder::new();

    // Switches, in record order.
    let mut sw_of: Vec<Option<SwitchId>> = vec![None; records.len()];
    let mut sw_rec: Vec<usize> = Vec::new();
    for (i, r) in records.iter().enumerate().filter(|(_, r)| r.kind == NodeKind::Switch) {
        if let Some(other) = b.switch_by_guid(r.guid) {
            let o = &records[sw_rec[other.idx()]];
            return Err(ctx.err(
                r.line,
                format!(
                    "duplicate switch GUID {} (also Switch \"{}\" at line {})",
                    fmt_guid(r.guid),
                    o.id,
                    o.line
                ),
            ));
        }
        let id = b
            .add_switch(r.guid, r.desc, r.nports)
            .map_err(|e| ctx.err(r.line, e.to_string()))?;
        sw_of[i] = Some(id);
        sw_rec.push(i);
    }

    // The first switch line naming each CA / router port, with the port GUID it gives.
    let mut switch_ref: Vec<Option<(u32, u32)>> = vec![None; total];
    for (i, r) in records.iter().enumerate().filter(|(_, r)| r.kind == NodeKind::Switch) {
        for (j, pl) in r.ports.iter().enumerate() {
            let k = ctx.remote_of[i][j];
            if records[k].kind != NodeKind::Switch {
                let s = ctx.slot(k, pl.remote_port);
                if switch_ref[s].is_none() {
                    switch_ref[s] = Some((i as u32, j as u32));
                }
            }
        }
    }

    // End ports: CA / router records in file order, then port number. A port is an end port if
    // its own line or a switch line cables it to a switch.
    let mut ep_of: Vec<Option<EndPortId>> = vec![None; total];
    let mut ep_rec: Vec<(usize, PortNum)> = Vec::new();
    for (k, r) in records.iter().enumerate().filter(|(_, r)| r.kind != NodeKind::Switch) {
        let node_type = if r.kind == NodeKind::Rt {
            NodeType::Other
        } else {
            NodeType::Compute
        };
        let mut any = false;
        for p in 1..=r.nports {
            let s = ctx.slot(k, p);
            let own = ctx.own_line[s].map(|j| &r.ports[j as usize]);
            let own_to_switch = match ctx.own_line[s] {
                Some(j) => records[ctx.remote_of[k][j as usize]].kind == NodeKind::Switch,
                None => false,
            };
            let sref = switch_ref[s].map(|(i, j)| &records[i as usize].ports[j as usize]);
            if !own_to_switch && sref.is_none() {
                continue;
            }
            let own_guid = own.and_then(|pl| pl.local_guid.map(|g| (g, pl.line)));
            let ref_guid = sref.and_then(|pl| pl.remote_guid.map(|g| (g, pl.line)));
            let port_guid = match (own_guid, ref_guid) {
                (Some((g, gl)), Some((h, hl))) if g != h => {
                    ctx.warn(
                        warnings,
                        hl,
                        format!(
                            "port GUID {} of {} differs from {} given at line {gl}; using the latter",
                            fmt_guid(h),
                            ctx.name(k, p),
                            fmt_guid(g)
                        ),
                    );
                    g
                }
                (Some((g, _)), _) | (None, Some((g, _))) => g,
                (None, None) => r.guid.wrapping_add(u64::from(p)),
            };
            let line = own.or(sref).map_or(r.line, |pl| pl.line);
            if let Some(other) = b.end_port_by_guid(port_guid) {
                let (orec, oport) = ep_rec[other.idx()];
                return Err(ctx.err(
                    line,
                    format!(
                        "duplicate end port GUID {} (also {}, line {})",
                        fmt_guid(port_guid),
                        ctx.name(orec, oport),
                        records[orec].line
                    ),
                ));
            }
            let id = b
                .add_end_port(port_guid, r.guid, r.desc, p, r.nports, node_type)
                .map_err(|e| ctx.err(line, e.to_string()))?;
            ep_of[s] = Some(id);
            ep_rec.push((k, p));
            any = true;
        }
        if !any {
            ctx.warn(
                warnings,
                r.line,
                format!(
                    "{} \"{}\" has no port cabled to a switch; it is left out of the model",
                    r.kind.name(),
                    r.id
                ),
            );
        }
    }

    // Links, in file order; each cable once.
    for (i, r) in records.iter().enumerate() {
        for (j, pl) in r.ports.iter().enumerate() {
            let k = ctx.remote_of[i][j];
            let rr = &records[k];
            let q = pl.remote_port;
            let back = ctx.back(i, pl, k);
            if let Back::Conflict(line) = back {
                return Err(ctx.conflict(i, pl, k, line));
            }
            let reciprocal = matches!(back, Back::Reciprocal);
            if !reciprocal && (sw_of[i].is_some() || sw_of[k].is_some()) {
                ctx.warn(
                    warnings,
                    pl.line,
                    format!(
                        "non-reciprocal link: {} is cabled to {}, but {} \"{}\" (line {}) has no line for port [{q}]",
                        ctx.name(i, pl.local),
                        ctx.name(k, q),
                        rr.kind.name(),
                        rr.id,
                        rr.line
                    ),
                );
            }
            let link_err = |e: crate::model::TopologyError| {
                ctx.err(
                    pl.line,
                    format!("cannot cable {} to {}: {e}", ctx.name(i, pl.local), ctx.name(k, q)),
                )
            };
            match (sw_of[i], sw_of[k]) {
                (Some(a), Some(c)) => {
                    // Once per cable: at the line with the smaller (record, port), or at the only line.
                    if reciprocal && (k, q) < (i, pl.local) {
                        continue;
                    }
                    b.connect_switches(a, pl.local, c, q).map_err(link_err)?;
                    let other_speed = match ctx.own_line[ctx.slot(k, q)] {
                        Some(oj) if reciprocal => rr.ports[oj as usize].speed,
                        _ => pl.speed,
                    };
                    b.switch_mut(a).ports[pl.local as usize].speed = pl.speed.map(str::to_string);
                    b.switch_mut(c).ports[q as usize].speed = other_speed.map(str::to_string);
                    if a == c {
                        ctx.warn(
                            warnings,
                            pl.line,
                            format!(
                                "self-looped cable: {} port [{}] to port [{q}]",
                                ctx.name(i, pl.local),
                                pl.local
                            ),
                        );
                    }
                }
                (Some(a), None) => {
                    let Some(ep) = ep_of[ctx.slot(k, q)] else { continue };
                    b.connect_end_port(ep, a, pl.local).map_err(link_err)?;
                    let other_speed = ctx.own_line[ctx.slot(k, q)].and_then(|oj| rr.ports[oj as usize].speed);
                    b.switch_mut(a).ports[pl.local as usize].speed = pl.speed.or(other_speed).map(str::to_string);
                }
                (None, Some(c)) => {
                    if reciprocal {
                        continue; // recorded from the switch's line
                    }
                    let Some(ep) = ep_of[ctx.slot(i, pl.local)] else {
                        continue;
                    };
                    b.connect_end_port(ep, c, q).map_err(link_err)?;
                    b.switch_mut(c).ports[q as usize].speed = pl.speed.map(str::to_string);
                }
                (None, None) => {
                    if !reciprocal || (i, pl.local) < (k, q) {
                        ctx.warn(
                            warnings,
                            pl.line,
                            format!(
                                "direct cable between {} and {} (no switch) skipped",
                                ctx.name(i, pl.local),
                                ctx.name(k, q)
                            ),
                        );
                    }
                }
            }
        }
    }
    Ok(b.build())
}
