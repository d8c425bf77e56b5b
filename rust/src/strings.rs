//! JSON strings: found and checked, never decoded here (the Python side decodes the few
//! distinct ones with the same decoder the Python path uses, so both give the same text).
//!
//! The text is valid UTF-8 (checked once over the whole chunk, see scan.rs). A string is
//! refused where the JSON grammar forbids it (a raw control character, an unknown escape, a
//! short `\u`) and where decoders disagree: a lone surrogate escape (`\ud800` without its
//! low half, or a low half alone). A refused chunk takes the Python path.

/// Why a string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Unterminated,
    Control,
    Escape,
    LoneSurrogate,
}

/// A checked string: the offset just past its closing quote and whether it has escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    pub end: usize,
    pub escaped: bool,
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 4)?;
    let mut value = 0u32;
    for &d in digits {
        value = value * 16 + (d as char).to_digit(16)?;
    }
    Some(value)
}

/// Eight bytes at a time: `0x01` in every byte, `0x80` in every byte.
const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;
/// Bytes of plain run read eight at a time before a longer string is searched by memchr.
const SHORT: usize = 32;

/// The high bit of each byte of `word` (little-endian: byte 0 first in the text) that is a
/// quote, a backslash or below 0x20. Exact at the lowest such byte (a borrow only runs from a
/// matching byte upward), so `trailing_zeros / 8` is the first one's index; bytes after it
/// may be flagged wrongly and are never used.
fn specials(word: u64) -> u64 {
    let quote = word ^ (LO * u64::from(b'"'));
    let backslash = word ^ (LO * u64::from(b'\\'));
    ((quote.wrapping_sub(LO) & !quote)
        | (backslash.wrapping_sub(LO) & !backslash)
        | (word.wrapping_sub(LO * 0x20) & !word))
        & HI
}

fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// The first quote, backslash or control character at or after `i`.
fn next_special(text: &[u8], mut i: usize) -> Option<usize> {
    // Short strings (keys, categories, most values): eight bytes a step, no call.
    let short_end = i.saturating_add(SHORT);
    while i < short_end {
        let Some(&word) = text.get(i..).and_then(|r| r.first_chunk::<8>()) else {
            break;
        };
        let found = specials(u64::from_le_bytes(word));
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    let rest = text.get(i..)?;
    if i < short_end {
        // fewer than eight bytes left in the text
        return rest.iter().position(|&b| is_special(b)).map(|p| i + p);
    }
    // A long plain run: the next quote or backslash (SIMD search), then the first control
    // character before it (a branch-free pass the compiler vectorises).
    let run = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    let plain = &rest[..run];
    if plain.iter().fold(false, |seen, &b| seen | (b < 0x20)) {
        return plain.iter().position(|&b| b < 0x20).map(|p| i + p);
    }
    (run < rest.len()).then_some(i + run)
}

/// The string whose opening quote is at `start`.
#[inline]
pub fn check(text: &[u8], start: usize) -> Result<Checked, (usize, Refusal)> {
    // The common string, short and plain: its closing quote in the first two words.
    let mut i = start + 1;
    for _ in 0..2 {
        let Some(&word) = text.get(i..).and_then(|r| r.first_chunk::<8>()) else {
            break;
        };
        let found = specials(u64::from_le_bytes(word));
        if found != 0 {
            let at = i + (found.trailing_zeros() / 8) as usize;
            if text.get(at) == Some(&b'"') {
                return Ok(Checked {
                    end: at + 1,
                    escaped: false,
                });
            }
            break;
        }
        i += 8;
    }
    check_any(text, start)
}

/// `check` for any string: escapes, long runs, the end of the text.
#[inline(never)]
fn check_any(text: &[u8], start: usize) -> Result<Checked, (usize, Refusal)> {
    let mut i = start + 1;
    let mut escaped = false;
    loop {
        let Some(at) = next_special(text, i) else {
            return Err((text.len(), Refusal::Unterminated));
        };
        i = at;
        match text[i] {
            b'"' => {
                return Ok(Checked {
                    end: i + 1,
                    escaped,
                })
            }
            b'\\' => {
                escaped = true;
                match text.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => {
                        let unit = hex4(text, i + 2).ok_or((i, Refusal::Escape))?;
                        if (0xDC00..0xE000).contains(&unit) {
                            return Err((i, Refusal::LoneSurrogate));
                        }
                        if (0xD800..0xDC00).contains(&unit) {
                            let low = if text.get(i + 6..i + 8) == Some(b"\\u") {
                                hex4(text, i + 8)
                            } else {
                                None
                            };
                            match low {
                                Some(low) if (0xDC00..0xE000).contains(&low) => i += 12,
                                _ => return Err((i, Refusal::LoneSurrogate)),
                            }
                        } else {
                            i += 6;
                        }
                    }
                    None => return Err((i, Refusal::Unterminated)),
                    Some(_) => return Err((i, Refusal::Escape)),
                }
            }
            _ => return Err((i, Refusal::Control)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(s: &str) -> Result<Checked, Refusal> {
        check(s.as_bytes(), 0).map_err(|(_, why)| why)
    }

    #[test]
    fn plain_and_escaped() {
        assert_eq!(
            checked(r#""abc" x"#),
            Ok(Checked {
                end: 5,
                escaped: false
            })
        );
        assert_eq!(
            checked(r#""a\"b""#),
            Ok(Checked {
                end: 6,
                escaped: true
            })
        );
        assert_eq!(checked(r#""\\""#).unwrap().end, 4);
        assert_eq!(checked(r#""\/\b\f\n\r\t""#).unwrap().end, 14);
        assert_eq!(checked(r#""\u00e9""#).unwrap().end, 8);
        assert_eq!(checked("\"é ü\"").unwrap().end, 7);
    }

    #[test]
    fn surrogate_pairs() {
        assert_eq!(checked(r#""\ud83d\ude00""#).unwrap().end, 14);
        assert_eq!(checked(r#""\uD83D\uDE00x""#).unwrap().end, 15);
        assert_eq!(checked(r#""\ud800""#), Err(Refusal::LoneSurrogate));
        assert_eq!(checked(r#""\ud800x""#), Err(Refusal::LoneSurrogate));
        assert_eq!(checked(r#""\udc00""#), Err(Refusal::LoneSurrogate));
        assert_eq!(checked(r#""\ud800\u0041""#), Err(Refusal::LoneSurrogate));
        assert_eq!(checked(r#""\ud800\ud800""#), Err(Refusal::LoneSurrogate));
    }

    #[test]
    fn the_first_special_byte_at_every_offset() {
        // every byte value at every offset of runs around the eight-byte and SHORT steps,
        // after a run of bytes that borrow (0x00 is special too, 0x80/0xff never are)
        for len in [1usize, 7, 8, 9, 31, 32, 33, 40, 70] {
            for at in 0..len {
                for b in 0..=255u8 {
                    for fill in [b'a', 0x80, 0xff, 0x21, 0x5d] {
                        let mut text = vec![fill; len];
                        text[at] = b;
                        let naive = text.iter().position(|&c| is_special(c));
                        assert_eq!(next_special(&text, 0), naive, "{len} {at} {b} {fill}");
                    }
                }
            }
        }
    }

    #[test]
    fn refused() {
        assert_eq!(checked(r#""abc"#), Err(Refusal::Unterminated));
        assert_eq!(checked(r#""abc\"#), Err(Refusal::Unterminated));
        assert_eq!(checked("\"a\nb\""), Err(Refusal::Control));
        assert_eq!(checked("\"a\tb\""), Err(Refusal::Control));
        assert_eq!(checked(r#""\x""#), Err(Refusal::Escape));
        assert_eq!(checked(r#""\u12g4""#), Err(Refusal::Escape));
        assert_eq!(checked(r#""\u12""#), Err(Refusal::Escape));
    }
}
