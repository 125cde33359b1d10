//! The fast path of [`crate::api::PredictRequest::parse`] for the usual body.
//!
//! Almost all of a `/predict` body is the base64 frame (~140 KB for a 256×256 PNG), and a
//! general JSON parser walks it byte by byte looking for the closing quote (~35 µs). Here the
//! top-level object is walked by hand: each image string is found with a 16-byte-wide scan
//! (~5 µs), and every other field's value is handed to `serde_json` on its own slice, so numbers
//! and strings get exactly serde's semantics.
//!
//! It returns `None` for anything unusual (an escape, a control or non-ASCII byte in a key or
//! an image string, an unknown or repeated key, a value that does not parse, trailing bytes),
//! and the caller then runs the plain serde parse, which decides and words the error. So a body
//! this accepts is one serde accepts with the same result (tested against it on many mutated
//! bodies).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::api::{BodyStr, PredictRequest};

/// Parse `body` if it is a plain `/predict` object; `None` leaves it to serde.
pub fn parse(body: &[u8]) -> Option<PredictRequest<'_>> {
    let mut c = Cursor { b: body, i: 0 };
    c.ws();
    c.eat(b'{')?;
    let (mut images, mut state, mut instruction) = (None, None, None);
    let (mut seed, mut noise, mut return_normalized) = (None, None, None);
    c.ws();
    if c.peek()? != b'}' {
        loop {
            let key = c.plain_string()?;
            c.ws();
            c.eat(b':')?;
            c.ws();
            match key {
                "images" if images.is_none() => images = Some(c.images()?),
                "state" if state.is_none() => state = Some(c.typed()?),
                "instruction" if instruction.is_none() => instruction = Some(c.typed()?),
                "seed" if seed.is_none() => seed = Some(c.typed()?),
                "noise" if noise.is_none() => noise = Some(c.typed()?),
                "return_normalized" if return_normalized.is_none() => {
                    return_normalized = Some(c.typed()?)
                }
                // Unknown keys are valid (ignored) but rare: serde skips them.
                _ => return None,
            }
            c.ws();
            match c.next()? {
                b',' => c.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    } else {
        c.i += 1;
    }
    c.ws();
    if c.i != body.len() {
        return None;
    }
    Some(PredictRequest {
        images: images?,
        state: state?,
        instruction: instruction?,
        seed: seed.flatten(),
        noise: noise.flatten(),
        return_normalized: return_normalized.flatten(),
    })
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A string of printable ASCII without escapes, borrowed; `None` for anything else.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = start + first_special(&self.b[start..]);
        if self.b.get(end) != Some(&b'"') {
            return None;
        }
        self.i = end + 1;
        // SAFETY: `first_special` passed only printable ASCII before `end`, which is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(&self.b[start..end]) })
    }

    /// `{"camera": "base64", ...}` with plain keys and strings, no repeated camera.
    fn images(&mut self) -> Option<BTreeMap<String, BodyStr<'a>>> {
        self.eat(b'{')?;
        let mut out = BTreeMap::new();
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(out);
        }
        loop {
            let key = self.plain_string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let value = self.plain_string()?;
            if out
                .insert(key.to_owned(), BodyStr(Cow::Borrowed(value)))
                .is_some()
            {
                return None;
            }
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(out),
                _ => return None,
            }
        }
    }

    /// The next value, deserialised by serde from its own slice.
    fn typed<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        let start = self.i;
        self.skip_value()?;
        serde_json::from_slice(&self.b[start..self.i]).ok()
    }

    /// Move past one JSON value (leniently: serde validates the slice afterwards).
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.next()? {
                b'"' => self.skip_string_body()?,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth = depth.checked_sub(1)?,
                _ => {
                    // A scalar runs to the next delimiter.
                    while let Some(c) = self.peek() {
                        if matches!(c, b',' | b'}' | b']' | b'"' | b' ' | b'\t' | b'\n' | b'\r') {
                            break;
                        }
                        self.i += 1;
                    }
                }
            }
            if depth == 0 {
                return Some(());
            }
            // Inside a container: separators and whitespace until the next value or closer.
            while let Some(b',' | b':' | b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
                self.i += 1;
            }
        }
    }

    /// After an opening quote: past the closing one, stepping over escapes.
    fn skip_string_body(&mut self) -> Option<()> {
        loop {
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next()?;
                }
                _ => {}
            }
        }
    }
}

/// Index of the first byte that is `"`, `\`, a control character or not ASCII (the bytes a
/// plain JSON string may not simply contain), or `s.len()`.
fn first_special(s: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SSE2 is part of x86_64.
        unsafe { first_special_sse2(s) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        s.iter().position(|&c| is_special(c)).unwrap_or(s.len())
    }
}

fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
unsafe fn first_special_sse2(s: &[u8]) -> usize {
    use std::arch::x86_64::*;
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let space = _mm_set1_epi8(0x20);
    let special = |v: __m128i| {
        // Signed compare: bytes >= 0x80 are negative, so `< 0x20` also catches non-ASCII.
        _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
            _mm_cmplt_epi8(v, space),
        )
    };
    // SAFETY (loads): each reads 16 bytes inside `s`, as the loop bounds check.
    let load = |at: usize| unsafe { _mm_loadu_si128(s.as_ptr().add(at).cast()) };
    let mut i = 0;
    // 64 bytes a step with one branch (the image string is long and has no special byte).
    while i + 64 <= s.len() {
        let m = _mm_or_si128(
            _mm_or_si128(special(load(i)), special(load(i + 16))),
            _mm_or_si128(special(load(i + 32)), special(load(i + 48))),
        );
        if _mm_movemask_epi8(m) != 0 {
            break;
        }
        i += 64;
    }
    while i + 16 <= s.len() {
        let bits = _mm_movemask_epi8(special(load(i)));
        if bits != 0 {
            return i + bits.trailing_zeros() as usize;
        }
        i += 16;
    }
    i + s[i..]
        .iter()
        .position(|&c| is_special(c))
        .unwrap_or(s.len() - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_parse(body: &[u8]) -> Option<PredictRequest<'_>> {
        serde_json::from_slice(body).ok()
    }

    /// A body with every field, some whitespace and a `data:` image.
    const BODY: &str = r#" { "images" : {"cam_a":"QUJDRA==", "cam_b" :"data:image/png;base64,QUJD"},
        "state": {"arm": [0.1, -2, 3e-3, 1.0000000000000002], "hand": []},
        "instruction": "pick the \"red\" cup \u00e9",
        "seed": 7, "noise": null, "return_normalized": true }
"#;

    #[test]
    fn the_usual_body_parses_as_serde_parses_it() {
        let fast = parse(BODY.as_bytes()).expect("fast path");
        assert_eq!(fast, serde_parse(BODY.as_bytes()).unwrap());
        assert!(matches!(fast.images["cam_a"].0, Cow::Borrowed("QUJDRA==")));
        let minimal = br#"{"images":{},"state":{},"instruction":""}"#;
        assert_eq!(parse(minimal).unwrap(), serde_parse(minimal).unwrap());
        let noise = br#"{"noise":[[1,2],[3,4.5]],"images":{"c":"AA=="},"state":{"s":[1]},"instruction":"x","seed":null}"#;
        assert_eq!(parse(noise).unwrap(), serde_parse(noise).unwrap());
    }

    #[test]
    fn unusual_bodies_are_left_to_serde() {
        for body in [
            &br#"{"images":{"c":"QU\/D"},"state":{},"instruction":"x"}"#[..],
            br#"{"images":{"c":"AA=="},"state":{},"instruction":"x","extra":1}"#,
            br#"{"images":{"c":"AA==","c":"AB=="},"state":{},"instruction":"x"}"#,
            br#"{"images":{"c":"AA=="},"state":{},"instruction":"x","instruction":"y"}"#,
            br#"{"images":{"c":"AA=="},"state":{},"instruction":"x"} x"#,
            br#"{"images":{"c":"AA=="},"state":{},"instruction":"x",}"#,
            br#"{"images":{"c":"AA=="},"state":{}}"#,
            br#"{"images":{"c":1},"state":{},"instruction":"x"}"#,
            br#"{"images":{"c":"AA=="},"state":{"a":[01]},"instruction":"x"}"#,
            "{\"images\":{\"c\":\"A\u{e9}\"},\"state\":{},\"instruction\":\"x\"}".as_bytes(),
            b"",
            b"[]",
        ] {
            assert!(parse(body).is_none(), "{}", String::from_utf8_lossy(body));
        }
    }

    /// Random edits of a valid body: whenever the fast path accepts one, serde accepts it
    /// too, with the same result.
    #[test]
    fn never_accepts_what_serde_would_not_or_differently() {
        let base = BODY.as_bytes().to_vec();
        let alphabet = b"{}[],:\" \\\n0123456789.-eE+atrufnlsAQ=/\x01\xc3\xa9";
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: usize| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as usize
        };
        let (mut accepted, mut total) = (0, 0);
        for _ in 0..20_000 {
            let mut b = base.clone();
            for _ in 0..1 + rnd(3) {
                let at = rnd(b.len());
                match rnd(3) {
                    0 => b[at] = alphabet[rnd(alphabet.len())],
                    1 => {
                        b.remove(at);
                    }
                    _ => b.insert(at, alphabet[rnd(alphabet.len())]),
                }
            }
            total += 1;
            if let Some(fast) = parse(&b) {
                accepted += 1;
                let slow = serde_parse(&b);
                assert_eq!(
                    Some(&fast),
                    slow.as_ref(),
                    "{}",
                    String::from_utf8_lossy(&b)
                );
            }
        }
        // The edits must leave some bodies valid, or this tests nothing.
        assert!(accepted > total / 50, "{accepted} of {total}");
    }

    #[test]
    fn the_scan_finds_the_first_special_byte_at_every_offset() {
        for len in 0..150 {
            for at in 0..=len {
                for special in [b'"', b'\\', 0x00, 0x1f, 0x80, 0xff] {
                    let mut s = vec![b'A'; len];
                    if at < len {
                        s[at] = special;
                    }
                    assert_eq!(first_special(&s), at, "len {len} at {at} byte {special}");
                }
            }
        }
    }
}
