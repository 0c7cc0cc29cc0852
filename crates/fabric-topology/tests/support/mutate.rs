//! Structure-aware text mutations shared by the parser fuzz targets (proptest, run by
//! `cargo test`). Included with `#[path]` by `fabric-routing/tests/fuzz_parsers.rs` and
//! `fabricd/tests/fuzz_config_state.rs`; the including file defines `EXTREME` (values that
//! replace numbers) and `FRAGMENTS` (text inserted anywhere) for its formats.

use proptest::prelude::*;

pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One mutation: kind, position, argument (interpreted modulo the text's size).
pub type Mutation = (u8, usize, usize);

pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec((0u8..7, any::<usize>(), any::<usize>()), 1..8)
}

/// Applies structure-aware mutations to `seed`: byte changes, deleted ranges, duplicated and
/// swapped lines, numbers replaced by extreme values, inserted fragments, truncation.
pub fn mutate(seed: &str, muts: &[Mutation]) -> String {
    let mut text = seed.to_string();
    for &(kind, pos, arg) in muts {
        let boundary = |t: &str, p: usize| {
            let mut p = p % (t.len() + 1);
            while !t.is_char_boundary(p) {
                p -= 1;
            }
            p
        };
        match kind {
            0 => {
                // Replace one character by a printable or whitespace one.
                let p = boundary(&text, pos);
                if p < text.len() {
                    let c = text[p..].chars().next().unwrap();
                    let by = [' ', '\t', 'x', '0', '9', 'f', '[', ']', '-', '#', ':', '\n'][arg % 12];
                    text.replace_range(p..p + c.len_utf8(), &by.to_string());
                }
            }
            1 => {
                // Delete a range.
                let a = boundary(&text, pos);
                let b = boundary(&text, a + arg % 40);
                let (a, b) = (a.min(b), a.max(b));
                text.replace_range(a..b, "");
            }
            2 | 3 => {
                // Duplicate or swap lines.
                let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
                let i = pos % lines.len();
                let j = arg % lines.len();
                if kind == 2 {
                    let l = lines[i].clone();
                    lines.insert(j, l);
                } else {
                    lines.swap(i, j);
                }
                text = lines.join("\n");
            }
            4 => {
                // Replace the n-th number-like token by an extreme value.
                let tokens: Vec<(usize, usize)> = token_spans(&text);
                if !tokens.is_empty() {
                    let (a, b) = tokens[pos % tokens.len()];
                    text.replace_range(a..b, super::EXTREME[arg % super::EXTREME.len()]);
                }
            }
            5 => {
                let p = boundary(&text, pos);
                text.insert_str(p, super::FRAGMENTS[arg % super::FRAGMENTS.len()]);
            }
            _ => {
                let p = boundary(&text, pos);
                text.truncate(p);
            }
        }
    }
    text
}

/// Byte spans of tokens that start with a digit (decimal or `0x` numbers).
pub fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let s = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}
