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

/// The string whose opening quote is at `start`.
pub fn check(text: &[u8], start: usize) -> Result<Checked, (usize, Refusal)> {
    let mut i = start + 1;
    let mut escaped = false;
    loop {
        // The plain run up to a quote or a backslash (SIMD search), then no control
        // character in it (a branch-free pass the compiler vectorises).
        let rest = text.get(i..).ok_or((i, Refusal::Unterminated))?;
        let Some(run) = memchr::memchr2(b'"', b'\\', rest) else {
            return Err((text.len(), Refusal::Unterminated));
        };
        if rest[..run].iter().fold(false, |seen, &b| seen | (b < 0x20)) {
            let at = rest[..run].iter().position(|&b| b < 0x20).unwrap_or(0);
            return Err((i + at, Refusal::Control));
        }
        i += run;
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
