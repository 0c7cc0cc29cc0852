//! Lexical helpers of the parser: pieces of a line with their offset, numbers, abbreviations.

/// A piece of a line with its byte offset in the line.
#[derive(Copy, Clone)]
pub(super) struct Piece<'a> {
    pub(super) text: &'a str,
    pub(super) off: usize,
}

impl<'a> Piece<'a> {
    pub(super) fn trim(self) -> Piece<'a> {
        let start = self.text.len() - self.text.trim_start().len();
        Piece {
            text: self.text.trim(),
            off: self.off + start,
        }
    }
    pub(super) fn split_at(self, i: usize, sep_len: usize) -> (Piece<'a>, Piece<'a>) {
        (
            Piece {
                text: &self.text[..i],
                off: self.off,
            },
            Piece {
                text: &self.text[i + sep_len..],
                off: self.off + i + sep_len,
            },
        )
    }
    /// Splits at the first `c`: (before, after) or (self, None).
    pub(super) fn split_once(self, c: char) -> (Piece<'a>, Option<Piece<'a>>) {
        match self.text.find(c) {
            Some(i) => {
                let (a, b) = self.split_at(i, c.len_utf8());
                (a, Some(b))
            }
            None => (self, None),
        }
    }
    /// Splits at every `c`.
    pub(super) fn split_all(self, c: char) -> Vec<Piece<'a>> {
        let mut out = Vec::new();
        let mut rest = self;
        loop {
            match rest.split_once(c) {
                (a, Some(b)) => {
                    out.push(a);
                    rest = b;
                }
                (a, None) => {
                    out.push(a);
                    return out;
                }
            }
        }
    }
}

/// Whether `tok` is a non-empty prefix of `word` (OpenSM's `strncmp(tok, word, strlen(tok))`).
pub(super) fn abbreviates(tok: &str, word: &str) -> bool {
    !tok.is_empty() && word.starts_with(tok)
}

/// A number as C's `strtoull(s, &end, 0)` with nothing left over: `0x` hex, leading `0` octal,
/// else decimal; no sign, no spaces.
pub(super) fn c_number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        let o = &s[1..];
        if !o.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return None;
        }
        u64::from_str_radix(o, 8).ok()
    } else {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    }
}

pub(super) const NUMBER_FORMS: &str = "0x hex, 0 octal or decimal";
