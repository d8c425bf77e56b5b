//! Trace numbers (µs) as exact integer nanoseconds, taken from the number's text.
//!
//! Two modes, as the Python reader has them (traceview/read/decode.py):
//! - plain: the fast decoder reads a number as an int or a float; a column of ints becomes
//!   `int * 1000` (traceview/columns/batch.py: each |v| < 2^62 / 1000), a column holding any
//!   float becomes `rint(float(v) * 1000.0)` in float64 (each |v| < 2^33);
//! - exact: the raw text, scaled by 10^3 in decimal, rounded half to even
//!   (traceview/columns/raw_numbers.py), |ns| < 2^62.
//!
//! Anything else (exponents, too many digits, out of range) is `None`: the caller hands the
//! chunk to the Python path, never an approximation.

/// |ns| below this, so ts + dur still fits int64 (raw_numbers.NS_LIMIT).
pub const NS_LIMIT: u64 = 1 << 62;
/// Ints of a plain column: |v| < this (batch._INT_LIMIT).
pub const INT_LIMIT: i64 = (NS_LIMIT / 1000) as i64;
/// Floats of a plain column: |v| < this (batch.FLOAT_EXACT_LIMIT).
pub const FLOAT_EXACT_LIMIT: f64 = 8_589_934_592.0; // 2^33
const MAX_RAW_DIGITS: usize = 19; // raw_numbers._MAX_DIGITS

use crate::simd::first_non_digit;

/// A JSON number token's parts: sign, integer digits, fraction digits, exponent present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub negative: bool,
    pub int: &'a [u8],
    pub frac: &'a [u8],
    pub has_exp: bool,
}

/// How many ASCII digits `text` starts with, sixteen bytes a step.
#[inline(always)]
fn digits(text: &[u8]) -> usize {
    match text.first_chunk::<16>() {
        Some(chunk) => match first_non_digit(chunk) {
            16 => 16 + digits_after(&text[16..]),
            n => n,
        },
        None => digits_after(text),
    }
}

/// `digits` past its first sixteen bytes, or for fewer than sixteen.
#[inline(never)]
fn digits_after(text: &[u8]) -> usize {
    let mut n = 0;
    while let Some(chunk) = text.get(n..).and_then(|r| r.first_chunk::<16>()) {
        let found = first_non_digit(chunk);
        n += found;
        if found < 16 {
            return n;
        }
    }
    n + text
        .get(n..)
        .map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count())
}

/// The number token at the start of `text` and its length, checked against JSON's grammar
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`); None if it is not one.
pub fn token(text: &[u8]) -> Option<(Token<'_>, usize)> {
    let negative = text.first() == Some(&b'-');
    let body = &text[usize::from(negative)..];
    let int_len = match body.first() {
        Some(b'0') => 1,
        Some(b'1'..=b'9') => digits(body),
        _ => return None,
    };
    let (int, mut rest) = body.split_at(int_len);
    let mut frac: &[u8] = &[];
    if let Some((b'.', after)) = rest.split_first() {
        let n = digits(after);
        if n == 0 {
            return None;
        }
        (frac, rest) = after.split_at(n);
    }
    let mut has_exp = false;
    if let Some((b'e' | b'E', after)) = rest.split_first() {
        has_exp = true;
        let after = match after.split_first() {
            Some((b'+' | b'-', signed)) => signed,
            _ => after,
        };
        let n = digits(after);
        if n == 0 {
            return None;
        }
        rest = &after[n..];
    }
    Some((
        Token {
            negative,
            int,
            frac,
            has_exp,
        },
        text.len() - rest.len(),
    ))
}

/// The length of the number token at the start of `text`, checked as `token` checks it,
/// None if it is not one: for the values only skipped, without building their parts.
#[inline(always)]
pub fn length(text: &[u8]) -> Option<usize> {
    let mut i = usize::from(text.first() == Some(&b'-'));
    let first = *text.get(i)?;
    i += 1;
    if first.wrapping_sub(b'1') < 9 {
        i += digits(text.get(i..).unwrap_or_default());
    } else if first != b'0' {
        return None;
    }
    match text.get(i) {
        // the commonest float, a fraction without an exponent, of a magnitude in range
        // (fraction_and_exponent's: integer digits - 1 < MAX_FLOAT_MAGNITUDE)
        Some(b'.') => {
            let n = digits(text.get(i + 1..).unwrap_or_default());
            let end = i + 1 + n;
            if n > 0
                && i <= MAX_FLOAT_MAGNITUDE as usize
                && !matches!(text.get(end), Some(b'e' | b'E'))
            {
                return Some(end);
            }
            fraction_and_exponent(text, i)
        }
        Some(b'e' | b'E') => fraction_and_exponent(text, i),
        _ => Some(i),
    }
}

/// Past this decimal magnitude (integer digits - 1 + exponent) a float token may not fit an
/// f64: msgspec then rejects the whole chunk ("Number out of range") and the Python reader
/// decodes it the slow way, so the scanner hands it over too. Generous: 1e308 still fits.
const MAX_FLOAT_MAGNITUDE: i64 = 300;

/// `length` from the end of the integer digits at `i`; None also for a float that may be out
/// of f64's range (an integer of any size is not: the decoders take it whole).
#[inline]
fn fraction_and_exponent(text: &[u8], mut i: usize) -> Option<usize> {
    let int_digits = i - usize::from(text.first() == Some(&b'-'));
    let mut magnitude = int_digits as i64 - 1;
    if text.get(i) == Some(&b'.') {
        let n = digits(text.get(i + 1..).unwrap_or_default());
        if n == 0 {
            return None;
        }
        i += 1 + n;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        i += 1;
        let negative = text.get(i) == Some(&b'-');
        if matches!(text.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(text.get(i..).unwrap_or_default());
        if n == 0 {
            return None;
        }
        if !negative {
            magnitude += exponent_value(&text[i..i + n]);
        }
        i += n;
    }
    (magnitude < MAX_FLOAT_MAGNITUDE).then_some(i)
}

/// An exponent's digits as a number, saturating far above any float's range.
fn exponent_value(digits: &[u8]) -> i64 {
    digits
        .iter()
        .fold(0i64, |v, d| (v * 10 + i64::from(d - b'0')).min(1 << 20))
}

/// For a whole checked token, `text[start..end]`: whether `small_int` takes it (an int of at
/// most 18 digits), without building its parts. Digits are counted in `text` past the
/// token (a token is never followed by a digit), sixteen a step even for a short one.
#[inline]
pub fn is_small_int(text: &[u8], start: usize, end: usize) -> bool {
    let body = start + usize::from(text.get(start) == Some(&b'-'));
    let len = end.saturating_sub(body);
    len <= 18 && digits(text.get(body..).unwrap_or_default()) == len
}

/// For a whole checked token, `text[start..end]`: its integer digits and whether it has an
/// exponent (counted as `is_small_int` counts them).
#[inline]
pub fn int_digits_and_exp(text: &[u8], start: usize, end: usize) -> (usize, bool) {
    let body = start + usize::from(text.get(start) == Some(&b'-'));
    let int = digits(text.get(body..).unwrap_or_default());
    // past the integer and fraction digits of a checked token, only an exponent is left
    let mut at = body + int;
    if text.get(at) == Some(&b'.') {
        at += 1 + digits(text.get(at + 1..).unwrap_or_default());
    }
    (int, at < end)
}

/// For a whole checked token, `text[start..end]`: whether it has an exponent, without
/// counting its digits (`e` and `E` are the only bytes of a number token with bit 0x40 set).
#[inline]
pub fn has_exponent(text: &[u8], start: usize, end: usize) -> bool {
    let Some(token) = text.get(start..end) else {
        return false;
    };
    // eight bytes a step (a time is ~17 bytes)
    let mut words = token.chunks_exact(8);
    let mut all = 0u64;
    for word in &mut words {
        all |= u64::from_le_bytes(word.try_into().unwrap_or_default());
    }
    let all = words
        .remainder()
        .iter()
        .fold(all, |all, &b| all | u64::from(b));
    all & 0x4040_4040_4040_4040 != 0
}

/// A number as the plain (fast) decoder holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Plain {
    Int(i64),
    Float(f64),
}

fn digits_value(digits: &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for &d in digits {
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(value)
}

/// An int token (no fraction, no exponent) of at most 18 digits as i64, else None.
pub fn small_int(t: &Token<'_>) -> Option<i64> {
    if !t.frac.is_empty() || t.has_exp || t.int.len() > 18 {
        return None;
    }
    let v = digits_value(t.int)? as i64;
    Some(if t.negative { -v } else { v })
}

/// The token as the plain decoder reads it, where every correct parser agrees: an int of at
/// most 18 digits, or a float without exponent whose digits make an integer below 2^53 and
/// whose fraction has at most 22 digits (then `digits / 10^frac` is one correctly rounded
/// division of two exact doubles: Clinger's fast path).
pub fn plain(t: &Token<'_>) -> Option<Plain> {
    if t.frac.is_empty() {
        return small_int(t).map(Plain::Int);
    }
    if t.has_exp || t.frac.len() > 22 || t.int.len() + t.frac.len() > 19 {
        return None;
    }
    let mantissa = digits_value(t.int)?
        .checked_mul(10u64.checked_pow(t.frac.len() as u32)?)?
        .checked_add(digits_value(t.frac)?)?;
    if mantissa >= 1 << 53 {
        return None;
    }
    let value = mantissa as f64 / POW10[t.frac.len()];
    Some(Plain::Float(if t.negative { -value } else { value }))
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A column of plain numbers (µs) as ns, as traceview/columns/batch.py's ns_array converts
/// it: all ints → `v * 1000` (each |v| < INT_LIMIT), else float64 `rint(v * 1000.0)` (each
/// |v| < 2^33). None where that function returns None.
pub fn plain_column(values: &[Plain]) -> Option<Vec<i64>> {
    if values.iter().all(|v| matches!(v, Plain::Int(_))) {
        return map_all(values, |v| match *v {
            Plain::Int(i) if -INT_LIMIT < i && i < INT_LIMIT => Some(i * 1000),
            _ => None,
        });
    }
    map_all(values, |v| {
        let f = match *v {
            Plain::Int(i) => i as f64, // |i| < 2^33 below: exact
            Plain::Float(f) => f,
        };
        if f.abs() < FLOAT_EXACT_LIMIT {
            Some((f * 1000.0).round_ties_even() as i64)
        } else {
            None
        }
    })
}

/// `f` of each item, None at the first None, allocated once (an `Option<Vec>` collected
/// from an iterator grows by doubling, its lower size bound being 0: ~4% of a scan with
/// CPU rows went to reallocating columns, callgrind).
pub fn map_all<A, T>(items: &[A], mut f: impl FnMut(&A) -> Option<T>) -> Option<Vec<T>> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(f(item)?);
    }
    Some(out)
}

/// The token's µs value as exact ns, rounded half to even, as raw_numbers.ns_of_raws takes
/// it: no exponent, 1 to 19 digits, |ns| < 2^62; else None.
pub fn exact_ns(t: &Token<'_>) -> Option<i64> {
    if t.has_exp {
        return None;
    }
    let digits = t.int.len() + t.frac.len();
    if digits > MAX_RAW_DIGITS {
        return None;
    }
    // at most 19 digits: below 10^19 < 2^64, no step overflows
    let magnitude = t.int.iter().chain(t.frac).fold(0u64, |m, &d| {
        m.wrapping_mul(10)
            .wrapping_add(u64::from(d.wrapping_sub(b'0')))
    });
    let mut magnitude = magnitude;
    let frac = t.frac.len();
    let mut scale: u64 = 1;
    if frac > 3 {
        let divisor = 10u64.pow((frac - 3) as u32);
        let (q, rest) = (magnitude / divisor, magnitude % divisor);
        // 2 * rest may pass 2^64 only when divisor > 2^63, which 10^16 is not.
        let twice = 2 * rest;
        let up = twice > divisor || (twice == divisor && q % 2 == 1);
        magnitude = q + u64::from(up);
    } else {
        scale = 10u64.pow((3 - frac) as u32);
    }
    if magnitude > (NS_LIMIT - 1) / scale {
        return None;
    }
    let ns = (magnitude * scale) as i64;
    Some(if t.negative { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(text: &str) -> Token<'_> {
        let (t, n) = token(text.as_bytes()).expect("a number");
        assert_eq!(n, text.len(), "{text}");
        t
    }

    fn exact(text: &str) -> Option<i64> {
        exact_ns(&tok(text))
    }

    #[test]
    fn grammar() {
        for bad in ["", "-", "01x", ".5", "1.", "1e", "1e+", "+1", "-.5"] {
            let parsed = token(bad.as_bytes());
            assert!(
                parsed.is_none() || parsed.unwrap().1 < bad.len(),
                "{bad} accepted whole"
            );
        }
        assert_eq!(token(b"01").unwrap().1, 1); // the 1 that follows is not part of it
        assert!(tok("-0.5e-7").has_exp);
    }

    #[test]
    fn digits_at_every_offset() {
        // every length 0..70, every byte value at every position, slices starting at three
        // alignments: the 16-byte steps and the tail against a byte loop
        for len in 0..70usize {
            for at in 0..=len {
                for b in 0..=255u8 {
                    for offset in [0, 1, 7] {
                        let mut text = vec![b'x'; offset];
                        text.extend(std::iter::repeat_n(b'7', len));
                        text.push(b'0');
                        text[offset + at] = b;
                        let text = &text[offset..];
                        let naive = text.iter().take_while(|c| c.is_ascii_digit()).count();
                        assert_eq!(digits(text), naive, "{len} {at} {b} {offset}");
                    }
                }
            }
        }
    }

    #[test]
    fn length_agrees_with_token() {
        let parts = [
            "",
            "-",
            "0",
            "1",
            "01",
            "123456789",
            ".",
            ".5",
            "e",
            "E+",
            "e-7",
            "x",
            "]",
        ];
        for a in parts {
            for b in parts {
                for c in parts {
                    let text = format!("{a}{b}{c}");
                    let t = text.as_bytes();
                    let expected = token(t).map(|(_, n)| n).filter(|&n| !past_range(&t[..n]));
                    assert_eq!(length(t), expected, "{text}");
                    if let Some((whole, n)) = token(t).filter(|&(_, n)| n == t.len()) {
                        let small = small_int(&whole).is_some();
                        let digits_exp = (whole.int.len(), whole.has_exp);
                        // alone, and within a text (never followed by a digit)
                        assert_eq!(is_small_int(t, 0, n), small, "{text}");
                        assert_eq!(int_digits_and_exp(t, 0, n), digits_exp, "{text} {n}");
                        assert_eq!(has_exponent(t, 0, n), whole.has_exp, "{text}");
                        let within = format!("[1,{text}, 12345678901234567890]");
                        let w = within.as_bytes();
                        assert_eq!(is_small_int(w, 3, 3 + n), small, "{text}");
                        assert_eq!(int_digits_and_exp(w, 3, 3 + n), digits_exp, "{text}");
                        assert_eq!(has_exponent(w, 3, 3 + n), whole.has_exp, "{text}");
                    }
                }
            }
        }
    }

    /// A checked token's decimal magnitude reaches MAX_FLOAT_MAGNITUDE (the slow way).
    fn past_range(token: &[u8]) -> bool {
        let text = std::str::from_utf8(token).unwrap();
        let body = text.trim_start_matches('-');
        let int_digits = body.find(['.', 'e', 'E']).unwrap_or(body.len()) as i64;
        let exp: i64 = match body.find(['e', 'E']) {
            Some(at) => body[at + 1..]
                .trim_start_matches('+')
                .parse()
                .unwrap_or(i64::MAX),
            None => return false, // no exponent: a fraction adds nothing; digits alone are few
        };
        exp > 0 && int_digits - 1 + exp >= MAX_FLOAT_MAGNITUDE
    }

    #[test]
    fn floats_that_may_be_out_of_range_are_not_taken() {
        let big_int = format!("1{}", "0".repeat(400));
        let big_float = format!("{big_int}.5");
        for taken in [
            "1e299",
            "-1.5e298",
            "1e-400",
            "0.5e299",
            "1E+2",
            big_int.as_str(),
        ] {
            assert_eq!(length(taken.as_bytes()), Some(taken.len()), "{taken}");
        }
        for given in [
            "1e300",
            "1e400",
            "-1e400",
            "12.5e299",
            "1e0000000000000000000400",
        ] {
            assert_eq!(length(given.as_bytes()), None, "{given}");
        }
        assert_eq!(length(big_float.as_bytes()), None);
    }

    #[test]
    fn exact_half_to_even() {
        assert_eq!(exact("1.0005"), Some(1000)); // 1000.5 → 1000 (even)
        assert_eq!(exact("1.0015"), Some(1002)); // 1001.5 → 1002
        assert_eq!(exact("1.00150001"), Some(1002));
        assert_eq!(exact("1.00049999"), Some(1000));
        assert_eq!(exact("-1.0005"), Some(-1000));
        assert_eq!(exact("-1.0015"), Some(-1002));
        assert_eq!(
            exact("1712195495505582.988"),
            Some(1_712_195_495_505_582_988)
        );
        assert_eq!(exact("-0"), Some(0));
        assert_eq!(exact("12"), Some(12_000));
        assert_eq!(exact("0.0000005"), Some(0));
        assert_eq!(exact("0.0005"), Some(0));
        assert_eq!(exact("0.0015"), Some(2));
    }

    #[test]
    fn exact_refuses() {
        assert_eq!(exact("1e3"), None);
        assert_eq!(exact("1.5E-2"), None);
        assert_eq!(exact("12345678901234567890"), None); // 20 digits
        assert_eq!(exact("1234567890123456.7890"), None); // 20 digits
        assert!(exact("1234567890123456789").is_none()); // 19 digits but beyond 2^62 ns
        assert!(exact("1234567890123456.789").is_some()); // 19 digits
    }

    #[test]
    fn exact_range_2_62() {
        // 2^62 ns = 4611686018427387.904 µs
        assert_eq!(exact("4611686018427387.903"), Some((1 << 62) - 1));
        assert_eq!(exact("4611686018427387.904"), None);
        assert_eq!(exact("-4611686018427387.903"), Some(-((1 << 62) - 1)));
        assert_eq!(exact("-4611686018427387.904"), None);
        // 20 digits: refused before any rounding
        assert_eq!(exact("4611686018427387.9025"), None);
        // two fraction digits: scaled by 10
        assert_eq!(exact("4611686018427387.90"), Some((1 << 62) - 4));
    }

    #[test]
    fn plain_values() {
        assert_eq!(plain(&tok("15")), Some(Plain::Int(15)));
        assert_eq!(plain(&tok("-0")), Some(Plain::Int(0)));
        assert_eq!(plain(&tok("1.5")), Some(Plain::Float(1.5)));
        assert_eq!(plain(&tok("0.1")), Some(Plain::Float(0.1)));
        assert_eq!(plain(&tok("1e3")), None);
        assert_eq!(plain(&tok("1234567890123456789")), None); // 19 digits
        assert_eq!(
            plain(&tok("123456789012345678")),
            Some(Plain::Int(123456789012345678))
        );
        assert_eq!(plain(&tok("9007199254740993.5")), None); // mantissa ≥ 2^53
                                                             // Clinger's fast path agrees with the correctly rounded parse
        for text in ["3.14159", "1712195495.505582", "0.000001", "8589934591.999"] {
            assert_eq!(plain(&tok(text)), Some(Plain::Float(text.parse().unwrap())));
        }
    }

    #[test]
    fn plain_columns() {
        let ints = [Plain::Int(5), Plain::Int(-7)];
        assert_eq!(plain_column(&ints), Some(vec![5000, -7000]));
        assert_eq!(plain_column(&[Plain::Int(INT_LIMIT)]), None);
        assert_eq!(plain_column(&[Plain::Int(-INT_LIMIT)]), None);
        assert_eq!(
            plain_column(&[Plain::Int(INT_LIMIT - 1)]),
            Some(vec![(INT_LIMIT - 1) * 1000])
        );
        // a float makes the column float: ints then need |v| < 2^33 too
        assert_eq!(
            plain_column(&[Plain::Int(1 << 33), Plain::Float(0.5)]),
            None
        );
        assert_eq!(
            plain_column(&[Plain::Int(3), Plain::Float(0.0005)]),
            Some(vec![3000, 0])
        );
        // float64 arithmetic, half to even: 0.0015 * 1000 = 1.5 exactly? (1.5000000000000002)
        let f = plain(&tok("0.0015")).unwrap();
        assert_eq!(
            plain_column(&[f]),
            Some(vec![(0.0015f64 * 1000.0).round_ties_even() as i64])
        );
        assert_eq!(plain_column(&[Plain::Float(2.5e-3)]), Some(vec![2])); // 2.5 → 2
        assert_eq!(plain_column(&[Plain::Float(FLOAT_EXACT_LIMIT)]), None);
        assert_eq!(plain_column(&[]), Some(vec![]));
    }
}
