//! Numbers for people: every measured value (`f64`) in the human output of fabricctl goes
//! through [`num`] or [`pct`], so `q39 8.024999999999999` reads `q39 8.02`. JSON output keeps
//! the full precision.

/// A value rounded to two decimals, trailing zeros dropped: `8.024999999999999` → `8.02`,
/// `12.5` → `12.5`, `3.0` → `3`, `-0.001` → `0`; not-a-number and infinities as Rust prints
/// them (`NaN`, `inf`).
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let s = format!("{x:.2}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A share (0..=1) as a percentage with [`num`]'s rounding: `0.41666` → `41.67%`.
pub fn pct(share: f64) -> String {
    format!("{}%", num(100.0 * share))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_rounded_to_two_decimals_without_trailing_zeros() {
        assert_eq!(num(8.024999999999999), "8.02");
        assert_eq!(num(8.026), "8.03");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(num(3.0), "3");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(-2.25), "-2.25");
        assert_eq!(num(1234567.891), "1234567.89");
        assert_eq!(num(40.0 / 12.0), "3.33");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(pct(5.0 / 12.0), "41.67%");
        assert_eq!(pct(1.0), "100%");
    }
}
