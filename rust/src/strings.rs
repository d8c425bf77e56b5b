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

use crate::simd::{first_special, is_special};

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 4)?;
    let mut value = 0u32;
    for &d in digits {
        value = value * 16 + (d as char).to_digit(16)?;
    }
    Some(value)
}

/// Bytes of plain run read sixteen at a time before a longer string is searched by memchr.
const SHORT: usize = 48;

/// The first quote, backslash or control character at or after `i`.
fn next_special(text: &[u8], mut i: usize) -> Option<usize> {
    // Short strings (keys, categories, most values): sixteen bytes a step, no call.
    let short_end = i.saturating_add(SHORT);
    while i < short_end {
        let Some(chunk) = text.get(i..).and_then(|r| r.first_chunk::<16>()) else {
            break;
        };
        let at = first_special(chunk);
        if at < 16 {
            return Some(i + at);
        }
        i += 16;
    }
    let rest = text.get(i..)?;
    if i < short_end {
        // fewer than sixteen bytes left in the text
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
#[inline(always)]
pub fn check(text: &[u8], start: usize) -> Result<Checked, (usize, Refusal)> {
    // The common string, short and plain: its closing quote in the first sixteen bytes.
    let mut plain_to = start + 1;
    if let Some(chunk) = text.get(plain_to..).and_then(|r| r.first_chunk::<16>()) {
        plain_to += first_special(chunk);
        if text.get(plain_to) == Some(&b'"') {
            return Ok(Checked {
                end: plain_to + 1,
                escaped: false,
            });
        }
    }
    check_any(text, plain_to)
}

/// `check` for any string: escapes, long runs, the end of the text. The bytes before
/// `plain_to` (past the opening quote) are plain.
#[inline(never)]
fn check_any(text: &[u8], plain_to: usize) -> Result<Checked, (usize, Refusal)> {
    let mut i = plain_to;
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
    use crate::simd::is_special;

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
        for len in [
            0usize, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 47, 48, 49, 64, 70,
        ] {
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
    fn check_at_every_offset_and_length() {
        // strings of every length 0..70 at every offset: the closing quote, or a refusal,
        // where the byte loop finds it
        for len in 0..70usize {
            for offset in 0..17 {
                for bad in [None, Some(b'\n'), Some(b'\\'), Some(b'"')] {
                    let mut text = vec![b' '; offset];
                    text.push(b'"');
                    let body_at = text.len();
                    text.extend(std::iter::repeat_n(b'x', len));
                    if let (Some(b), true) = (bad, len > 0) {
                        text[body_at + len / 2] = b;
                    }
                    text.push(b'"');
                    let first = text[body_at..].iter().position(|&c| is_special(c)).unwrap();
                    let expected = match text[body_at + first] {
                        b'"' => Ok(body_at + first + 1),
                        // `\x`, or `\"` then no closing quote
                        b'\\' if text[body_at + first + 1] == b'x' => Err(Refusal::Escape),
                        b'\\' => Err(Refusal::Unterminated),
                        _ => Err(Refusal::Control),
                    };
                    let got = check(&text, offset).map(|c| c.end).map_err(|(_, why)| why);
                    assert_eq!(got, expected, "{len} {offset} {bad:?}");
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
