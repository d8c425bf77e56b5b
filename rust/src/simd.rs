//! Byte classes of 16 bytes at once: the index of the first byte of (or not of) a class, 16
//! if none. SSE2 compares and one mask on x86_64 (its baseline), the same answers eight
//! bytes a step in a `u64` elsewhere; tests hold both to a byte loop.

/// A quote, a backslash or a control character: where a plain string run stops.
pub fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// JSON whitespace.
pub fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::*;

    /// The index of the lowest set bit of a 16-bit mask, 16 if none.
    #[inline(always)]
    fn first(mask: i32) -> usize {
        (mask as u32 | 1 << 16).trailing_zeros() as usize
    }

    // SAFETY (each block below): `chunk` is 16 bytes long, so the unaligned 16-byte load
    // reads only inside it; the intrinsics need SSE2, which this build's target has (the
    // cfg of this module).

    #[inline(always)]
    pub fn first_special(chunk: &[u8; 16]) -> usize {
        first(unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // unsigned b <= 0x1f: min(b, 0x1f) == b
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
        })
    }

    #[inline(always)]
    pub fn first_non_ws(chunk: &[u8; 16]) -> usize {
        first(unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            let ws = _mm_or_si128(
                _mm_or_si128(eq(b' '), eq(b'\n')),
                _mm_or_si128(eq(b'\t'), eq(b'\r')),
            );
            !_mm_movemask_epi8(ws) & 0xffff
        })
    }

    #[inline(always)]
    pub fn first_non_digit(chunk: &[u8; 16]) -> usize {
        first(unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            // a digit: b - '0' (wrapping) <= 9 unsigned
            let d = _mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8));
            let digit = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d);
            !_mm_movemask_epi8(digit) & 0xffff
        })
    }

    /// The bits of the bytes where two 16-byte chunks are equal.
    #[inline(always)]
    pub fn equal_bytes(a: &[u8; 16], b: &[u8; 16]) -> u32 {
        // SAFETY: two 16-byte arrays, loaded whole; SSE2 is this build's baseline.
        unsafe {
            let x = _mm_loadu_si128(a.as_ptr().cast());
            let y = _mm_loadu_si128(b.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) as u32
        }
    }

    /// `ascii_and_find` for the offsets whose loads fit the text: sixty-four candidate
    /// offsets a step, the needle's bytes 1 and 9 compared at each (the candidates, rare,
    /// then compared whole) and bytes 1..65 of the step or-ed into the high-bit check.
    /// Returns (every byte before `done` + 1 ASCII, the needle's first offset, `done`).
    #[inline]
    pub fn ascii_and_find_head(text: &[u8], needle: &[u8]) -> (bool, Option<usize>, usize) {
        const STEP: usize = 64;
        const SPAN: usize = STEP + 9 + 16;
        static NONE: [u8; 16] = [0; 16];
        let (Some(&first), Some(&ninth)) = (needle.get(1), needle.get(9)) else {
            return (true, None, 0);
        };
        let mut p = 0;
        // SAFETY (each block below): every load is of a `&[u8; 16]` (16 bytes, in bounds);
        // SSE2 is this build's baseline (the module's cfg).
        let load = |w: &[u8; SPAN], o: usize| {
            let chunk: &[u8; 16] = w
                .get(o..o + 16)
                .and_then(|c| c.try_into().ok())
                .unwrap_or(&NONE);
            unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) }
        };
        let (a, b) = unsafe { (_mm_set1_epi8(first as i8), _mm_set1_epi8(ninth as i8)) };
        let mut high = unsafe { _mm_setzero_si128() };
        while let Some(w) = text.get(p..).and_then(|r| r.first_chunk::<SPAN>()) {
            let mut hits = unsafe { _mm_setzero_si128() };
            for k in 0..STEP / 16 {
                let x = load(w, 1 + 16 * k);
                let y = load(w, 9 + 16 * k);
                unsafe {
                    high = _mm_or_si128(high, x);
                    hits = _mm_or_si128(
                        hits,
                        _mm_and_si128(_mm_cmpeq_epi8(x, a), _mm_cmpeq_epi8(y, b)),
                    );
                }
            }
            if unsafe { _mm_movemask_epi8(hits) } != 0 {
                if let Some(q) = (p..p + STEP).find(|&q| text[q..].starts_with(needle)) {
                    return (false, Some(q), q);
                }
            }
            p += STEP;
        }
        (unsafe { _mm_movemask_epi8(high) } == 0, None, p)
    }
}

/// The same classes eight bytes a step in a `u64` (any target): byte 0 of the text is the
/// low byte of the word, and each mask below is exact in every byte (no borrow or carry
/// crosses bytes), its high bit set where the byte is of the class.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
mod swar {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

    /// The high bit of each byte that is not zero.
    fn nonzero(x: u64) -> u64 {
        ((x & LOW7) + LOW7) | x
    }

    fn equal(word: u64, b: u8) -> u64 {
        !nonzero(word ^ (LO * u64::from(b))) & HI
    }

    /// Bytes below `n` (n <= 0x80): (b | 0x80) - n keeps its high bit iff b >= n.
    fn below(word: u64, n: u8) -> u64 {
        !(((word | HI) - LO * u64::from(n)) | word) & HI
    }

    fn special(word: u64) -> u64 {
        equal(word, b'"') | equal(word, b'\\') | below(word, 0x20)
    }

    fn non_ws(word: u64) -> u64 {
        !(equal(word, b' ') | equal(word, b'\n') | equal(word, b'\t') | equal(word, b'\r')) & HI
    }

    fn non_digit(word: u64) -> u64 {
        // x = b ^ '0' is a digit's value (0..=9) for a digit, and never for another byte
        let x = word ^ (LO * u64::from(b'0'));
        (((x & LOW7) + LO * (0x7f - 9)) | x) & HI
    }

    fn first(chunk: &[u8; 16], class: fn(u64) -> u64) -> usize {
        let (a, b) = chunk.split_at(8);
        let word = |half: &[u8]| u64::from_le_bytes(half.try_into().unwrap_or_default());
        match (class(word(a)), class(word(b))) {
            (0, 0) => 16,
            (0, found) => 8 + (found.trailing_zeros() / 8) as usize,
            (found, _) => (found.trailing_zeros() / 8) as usize,
        }
    }

    pub fn first_special(chunk: &[u8; 16]) -> usize {
        first(chunk, special)
    }

    pub fn first_non_ws(chunk: &[u8; 16]) -> usize {
        first(chunk, non_ws)
    }

    pub fn first_non_digit(chunk: &[u8; 16]) -> usize {
        first(chunk, non_digit)
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub use sse2::{first_non_digit, first_non_ws, first_special};

/// Whether the `len` bytes of `t` at `a` equal those at `b` (false where either run leaves
/// `t`): sixteen bytes a step while both loads fit, the last step masked to the run.
#[inline(always)]
pub fn same_run(t: &[u8], a: usize, b: usize, len: usize) -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        let mut n = 0;
        while let (Some(x), Some(y)) = (
            t.get(a + n..).and_then(|r| r.first_chunk::<16>()),
            t.get(b + n..).and_then(|r| r.first_chunk::<16>()),
        ) {
            let equal = sse2::equal_bytes(x, y);
            if len - n <= 16 {
                let wanted = (1u32 << (len - n)) - 1;
                return equal & wanted == wanted;
            }
            if equal != 0xffff {
                return false;
            }
            n += 16;
        }
    }
    match (t.get(a..a + len), t.get(b..b + len)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Whether `text` is all ASCII (if not, or where the needle is found: false, whatever the
/// text) and the needle's first offset: one pass for the chunk's UTF-8 check (all ASCII is
/// valid) and its search for the collectives' key, where std's check and memmem were two.
pub fn ascii_and_find(text: &[u8], needle: &[u8]) -> (bool, Option<usize>) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    let (ascii, found, done) = sse2::ascii_and_find_head(text, needle);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let (ascii, found, done) = (true, None, 0);
    if found.is_some() {
        return (false, found);
    }
    // the offsets past the head, and the bytes its check did not cover (0, and past done)
    let rest = text.get(done..).unwrap_or_default();
    let found = memchr::memmem::find(rest, needle).map(|at| done + at);
    let ascii = ascii && text.first().is_none_or(u8::is_ascii) && rest.is_ascii();
    (ascii && found.is_none(), found)
}
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
pub use swar::{first_non_digit, first_non_ws, first_special};

#[cfg(test)]
mod tests {
    use super::*;

    type Class = (
        fn(&[u8; 16]) -> usize,
        fn(&[u8; 16]) -> usize,
        fn(u8) -> bool,
    );

    #[test]
    fn ascii_and_find_agree_with_std() {
        // the key at every offset of texts of every length around the 64-byte steps, with
        // and without a non-ASCII byte (everywhere) and near-misses of its compared bytes
        let needle = b"\"Collective name\"";
        let fills: [&[u8]; 3] = [b"a", b"C  \"  v Collective", b"\"Collective nam\""];
        for len in [0, 1, 9, 17, 63, 64, 88, 89, 90, 153, 154, 200, 300] {
            for fill in fills {
                let base: Vec<u8> = fill.iter().copied().cycle().take(len).collect();
                let mut texts = vec![base.clone()];
                for at in 0..len {
                    let mut t = base.clone();
                    t[at] = 0xc3;
                    texts.push(t);
                    if at + needle.len() <= len {
                        let mut t = base.clone();
                        t[at..at + needle.len()].copy_from_slice(needle);
                        texts.push(t.clone());
                        t[at + 8] = b'x';
                        texts.push(t);
                    }
                }
                for t in &texts {
                    let found = memchr::memmem::find(t, needle);
                    let (ascii, got) = ascii_and_find(t, needle);
                    assert_eq!(got, found, "{len} {t:?}");
                    assert_eq!(ascii, found.is_none() && t.is_ascii(), "{len} {t:?}");
                }
            }
        }
    }

    #[test]
    fn every_byte_at_every_position_and_alignment() {
        // the SIMD and SWAR answers against the byte loop: every byte value at every
        // position of 16, among fills of each class, loaded at every offset 0..70 of a buffer
        let classes: [Class; 3] = [
            (first_special, swar::first_special, |b| is_special(b)),
            (first_non_ws, swar::first_non_ws, |b| !is_ws(b)),
            (first_non_digit, swar::first_non_digit, |b| {
                !b.is_ascii_digit()
            }),
        ];
        let mut buffer = [0u8; 16 + 70];
        for (simd, swar, naive) in classes {
            for offset in 0..70 {
                for at in 0..16 {
                    for b in 0..=255u8 {
                        for fill in [b'a', b' ', b'7', b'\n', 0x80, 0xff, 0x1f, 0x5d] {
                            buffer.fill(fill);
                            buffer[offset + at] = b;
                            let chunk = buffer[offset..].first_chunk::<16>().unwrap();
                            let expected = chunk.iter().position(|&c| naive(c)).unwrap_or(16);
                            assert_eq!(simd(chunk), expected, "{offset} {at} {b} {fill}");
                            assert_eq!(swar(chunk), expected, "{offset} {at} {b} {fill}");
                        }
                    }
                }
            }
        }
    }
}
