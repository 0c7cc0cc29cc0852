//! Parsers of what the diagnostic tools print about multicast, partition and port tables:
//! `ibroute -M` (a switch's multicast forwarding table), `smpquery pkeys` (a port's P_Key
//! table) and the `Field:....value` lines of `smpquery portinfo` / `switchinfo` / `nodeinfo`.

use std::collections::BTreeMap;

/// What `ibroute -M` prints, as MLID → ports of its mask (MLIDs with an empty mask are not
/// printed by ibroute, so they are absent).
///
/// The table reads
/// ```text
///      Ports: 0 1 2 3 4 5 6 7 8
///  MLid
/// 0xc000      x x   x         x
/// ```
/// with, on switches of more than 9 ports, a line of tens digits above the `Ports:` line: the
/// column of each unit digit after `Ports:` is a port, numbered from 0 in order.
///
/// # Panics
/// When there is no `Ports:` line, or a row marks a column that is no port (with the text).
pub fn parse_ibroute_mcast(text: &str) -> BTreeMap<u64, Vec<u32>> {
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("Ports:"))
        .unwrap_or_else(|| panic!("no `Ports:` line in ibroute -M output:\n{text}"));
    let start = header.find("Ports:").map_or(0, |i| i + "Ports:".len());
    let columns: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| i >= start && c.is_ascii_digit())
        .map(|(i, _)| i)
        .collect();
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let Some(hex) = l.split_whitespace().next().and_then(|w| w.strip_prefix("0x")) else {
            continue;
        };
        let Ok(mlid) = u64::from_str_radix(hex, 16) else {
            continue;
        };
        let mut ports = Vec::new();
        for (i, c) in l.char_indices().skip(2 + hex.len()) {
            if c == 'x' {
                let port = columns
                    .iter()
                    .position(|&col| col == i)
                    .unwrap_or_else(|| panic!("column {i} of {l:?} is no port of {header:?}:\n{text}"));
                ports.push(port as u32);
            }
        }
        out.insert(mlid, ports);
    }
    out
}

/// What `smpquery pkeys` prints (`   0: 0xffff 0x8001 ...` lines), as the table's entries in
/// order (trailing text such as the capacity line is ignored).
pub fn parse_smpquery_pkeys(text: &str) -> Vec<u16> {
    let mut out = Vec::new();
    for l in text.lines() {
        let Some((idx, rest)) = l.split_once(':') else { continue };
        if idx.trim().parse::<usize>().is_err() {
            continue;
        }
        out.extend(
            rest.split_whitespace()
                .filter_map(|w| w.strip_prefix("0x"))
                .filter_map(|h| u16::from_str_radix(h, 16).ok()),
        );
    }
    out
}

/// The `Name:.....value` lines of `smpquery portinfo` (and `switchinfo`, `nodeinfo`) as
/// name → value text.
pub fn parse_smpquery_fields(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let v = v.trim_start_matches('.');
            (!k.starts_with('#') && !k.trim().is_empty()).then(|| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ibroute_mcast_rows_become_port_lists() {
        // As ibroute (infiniband-diags 44) prints it for an 8-port ibsim switch.
        let text = "Multicast mlids [0xc000-0xc3ff] of switch DR path slid 65535; dlid 65535; 0,1 guid 0x0000000000200000 (Switch1):\n     Ports: 0 1 2 3 4 5 6 7 8 \n MLid\n0xc000      x x x x x x     x \n0xc002      x     x   x x x   \n0xc005        x x   x x x     \n3 valid mlids dumped \n";
        let m = parse_ibroute_mcast(text);
        assert_eq!(m[&0xc000], vec![0, 1, 2, 3, 4, 5, 8]);
        assert_eq!(m[&0xc002], vec![0, 3, 5, 6, 7]);
        assert_eq!(m[&0xc005], vec![1, 2, 4, 5, 6]);
        assert_eq!(m.len(), 3);
        // Two header lines (tens above units) on a switch of more than 9 ports.
        let header = "     Ports: 0 1 2 3 4 5 6 7 8 9 0 1 2";
        let col = |port: usize| header.find("Ports:").unwrap() + "Ports: ".len() + 2 * port;
        let mut row = vec![b' '; col(12) + 1];
        row[..6].copy_from_slice(b"0xc001");
        row[col(10)] = b'x';
        row[col(12)] = b'x';
        let wide = format!(
            "{}1 1 1\n{header}\n MLid\n{}\n",
            " ".repeat(col(10)),
            String::from_utf8(row).unwrap()
        );
        assert_eq!(parse_ibroute_mcast(&wide)[&0xc001], vec![10, 12]);
    }

    #[test]
    fn pkeys_and_fields() {
        let text = "   0: 0xffff 0x8001 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000\n   8: 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0007\n64 pkeys capacity for this port\n";
        let p = parse_smpquery_pkeys(text);
        assert_eq!(p.len(), 16);
        assert_eq!((p[0], p[1], p[15]), (0xffff, 0x8001, 7));
        let f = parse_smpquery_fields(
            "# Port info: DR path slid 65535; dlid 65535; 0,1 port 2\nMkey:............................0x0000000000000000\nProtectBits:.....................0\nPartEnforceInb:..................1\n",
        );
        assert_eq!(f["Mkey"], "0x0000000000000000");
        assert_eq!(f["ProtectBits"], "0");
        assert_eq!(f["PartEnforceInb"], "1");
        assert!(!f.keys().any(|k| k.starts_with('#')));
    }
}
