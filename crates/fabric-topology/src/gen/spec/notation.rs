//! The fat-tree notation as text: the canonical display of a [`PgftSpec`] and its parser (with
//! 1-based columns in syntax errors).

use std::fmt;
use std::str::FromStr;

use super::{at_most_max_levels, join, nonzero, PgftSpec, SpecKind};
use crate::gen::error::GenError;

impl fmt::Display for PgftSpec {
    /// The canonical notation: `PGFT(h;m;w;p)`, `XGFT(h;m;w)`, `KARY(k,n)` or `QFT(h;m;w;p)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, w, p) = (join(&self.m), join(&self.w), join(&self.p));
        match self.kind {
            SpecKind::Pgft | SpecKind::Qft => write!(f, "{}({};{m};{w};{p})", self.kind, self.h),
            SpecKind::Xgft => write!(f, "XGFT({};{m};{w})", self.h),
            SpecKind::Kary => write!(f, "KARY({},{})", self.m.first().copied().unwrap_or(0), self.h),
        }
    }
}

impl FromStr for PgftSpec {
    type Err = GenError;

    /// Parses `PGFT(h;m..;w..;p..)`, `XGFT(h;m..;w..)`, `KARY(k,n)`, `QFT(h;m..;w..;p..)` or
    /// `RLFT(h;K;p..)` (keywords in any case, blanks allowed between tokens) and validates.
    fn from_str(s: &str) -> Result<PgftSpec, GenError> {
        let mut c = Cursor::new(s);
        c.skip_ws();
        let start = c.pos;
        let word = c.word();
        let rlft = word.eq_ignore_ascii_case("RLFT");
        let kind = match SpecKind::from_name(&word) {
            Some(k) => k,
            None if rlft => SpecKind::Pgft,
            None => {
                c.pos = start;
                return Err(c.err(if word.is_empty() {
                    format!(
                        "expected a fat-tree kind (PGFT, XGFT, KARY, QFT or RLFT), found {}",
                        c.found()
                    )
                } else {
                    format!("unknown fat-tree kind '{word}', expected PGFT, XGFT, KARY, QFT or RLFT")
                }));
            }
        };
        let name = if rlft {
            "RLFT".to_string()
        } else {
            kind.name().to_string()
        };
        c.expect('(', &format!("after {name}"))?;
        let spec = if rlft {
            let h = c.number("h")?;
            c.expect(';', "after h")?;
            let k = c.number("K")?;
            c.expect(';', "after K")?;
            let p = c.list("p")?;
            c.expect(')', "after the p values")?;
            c.end()?;
            nonzero(s, "h", h)?;
            at_most_max_levels(s, h as usize)?;
            if p.len() != h as usize {
                return Err(GenError::WrongLength {
                    spec: s.into(),
                    vector: "p",
                    expected: h as usize,
                    got: p.len(),
                });
            }
            return PgftSpec::rlft_labelled(k, p, s);
        } else if kind == SpecKind::Kary {
            let k = c.number("k")?;
            c.expect(',', "after k")?;
            let n = c.number("n")?;
            c.expect(')', "after n")?;
            c.end()?;
            nonzero(s, "k", k)?;
            nonzero(s, "n", n)?;
            at_most_max_levels(s, n as usize)?;
            PgftSpec::kary_unchecked(k, n as usize)
        } else {
            let h = c.number("h")?;
            c.expect(';', "after h")?;
            let m = c.list("m")?;
            c.expect(';', "after the m values")?;
            let w = c.list("w")?;
            let p = if kind == SpecKind::Xgft {
                c.expect(')', "after the w values")?;
                vec![1; m.len()]
            } else {
                c.expect(';', "after the w values")?;
                let p = c.list("p")?;
                c.expect(')', "after the p values")?;
                p
            };
            c.end()?;
            PgftSpec {
                kind,
                h: h as usize,
                m,
                w,
                p,
            }
        };
        spec.check(s)?;
        Ok(spec)
    }
}

/// A character cursor over a notation string, for errors with 1-based columns.
struct Cursor<'a> {
    text: &'a str,
    chars: Vec<char>,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor {
            text,
            chars: text.chars().collect(),
            pos: 0,
        }
    }

    fn err(&self, reason: String) -> GenError {
        GenError::Syntax {
            spec: self.text.to_string(),
            column: self.pos + 1,
            reason,
        }
    }

    fn found(&self) -> String {
        match self.chars.get(self.pos) {
            Some(c) => format!("'{c}'"),
            None => "end of input".to_string(),
        }
    }

    fn skip_ws(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while self.chars.get(self.pos).is_some_and(char::is_ascii_alphabetic) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn expect(&mut self, want: char, context: &str) -> Result<(), GenError> {
        self.skip_ws();
        if self.chars.get(self.pos) == Some(&want) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format!("expected '{want}' {context}, found {}", self.found())))
        }
    }

    fn number(&mut self, what: &str) -> Result<u32, GenError> {
        self.skip_ws();
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(d) = self.chars.get(self.pos).and_then(|c| c.to_digit(10)) {
            value = value * 10 + u64::from(d);
            if value > u64::from(u32::MAX) {
                self.pos = start;
                return Err(self.err(format!("value of {what} is too large (at most {})", u32::MAX)));
            }
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.err(format!("expected a number for {what}, found {}", self.found())));
        }
        Ok(value as u32)
    }

    fn list(&mut self, what: &str) -> Result<Vec<u32>, GenError> {
        let mut v = vec![self.number(what)?];
        loop {
            self.skip_ws();
            if self.chars.get(self.pos) == Some(&',') {
                self.pos += 1;
                v.push(self.number(what)?);
            } else {
                return Ok(v);
            }
        }
    }

    fn end(&mut self) -> Result<(), GenError> {
        self.skip_ws();
        if self.pos < self.chars.len() {
            Err(self.err(format!("unexpected {} after the closing ')'", self.found())))
        } else {
            Ok(())
        }
    }
}
