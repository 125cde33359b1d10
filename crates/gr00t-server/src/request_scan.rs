//! The fast path of [`crate::api::PredictRequest::parse`] for the usual body.
//!
//! Almost all of a `/predict` body is the base64 frame (~140 KB for a 256×256 PNG), and a
//! general JSON parser walks it byte by byte looking for the closing quote (~35 µs). Here the
//! top-level object is walked by hand: each image string is found with a 16-byte-wide scan
//! (~5 µs), and every other field's value is handed to `serde_json` on its own slice, so numbers
//! and strings get exactly serde's semantics.
//!
//! A `noise` array of plain numbers (50×128 of them for the full model, 125 KB of text) is
//! read here too, straight into a flat vector: serde's general value tree took ~220 µs for
//! it, this ~95 µs. Each number is checked against JSON's grammar and converted correctly
//! rounded, as serde (with `float_roundtrip`) and Python's `json` do.
//!
//! It returns `None` for anything unusual (an escape, a control or non-ASCII byte in a key or
//! an image string, an unknown or repeated key, a value that does not parse, trailing bytes),
//! and the caller then runs the plain serde parse, which decides and words the error. So a body
//! this accepts is one serde accepts with the same result (tested against it on many mutated
//! bodies).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::api::{BodyStr, NoiseField, PredictRequest};

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
                "noise" if noise.is_none() => noise = Some(c.noise()?),
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

    /// The `noise` value: read here when it is a plain array of numbers, else by serde.
    fn noise(&mut self) -> Option<Option<NoiseField>> {
        let start = self.i;
        if let Some((shape, values)) = self.numeric_array() {
            return Some(Some(NoiseField::Parsed { shape, values }));
        }
        self.i = start;
        self.typed()
    }

    /// Two or three levels of non-empty, rectangular arrays of JSON numbers (the forms
    /// `[H, D]` and `[1, H, D]` of a client's noise): the shape and the values in row-major
    /// order; `None` for anything else (serde then reads it and words any error).
    fn numeric_array(&mut self) -> Option<(Vec<usize>, Vec<f64>)> {
        let mut dims = [None; 3];
        let mut leaf = None;
        // Room for the full model's 50×128 values (bounded by what is left of the body, at the
        // ~20 bytes a printed float32 takes), so the vector does not grow while it is read.
        let mut values = Vec::with_capacity(((self.b.len() - self.i) / 20).min(8192));
        self.array_level(0, &mut dims, &mut leaf, &mut values)?;
        let levels = leaf? + 1;
        let shape = dims[..levels]
            .iter()
            .copied()
            .collect::<Option<Vec<usize>>>()?;
        (levels >= 2).then_some((shape, values))
    }

    /// One array at nesting `depth`: its items are all arrays or all numbers (numbers only at
    /// the `leaf` depth), and it has as many as every other array at its depth (`dims`).
    fn array_level(
        &mut self,
        depth: usize,
        dims: &mut [Option<usize>; 3],
        leaf: &mut Option<usize>,
        values: &mut Vec<f64>,
    ) -> Option<()> {
        self.eat(b'[')?;
        let mut n = 0usize;
        loop {
            self.ws();
            match self.peek()? {
                b'[' if depth + 1 < dims.len() && *leaf != Some(depth) => {
                    self.array_level(depth + 1, dims, leaf, values)?
                }
                b'-' | b'0'..=b'9' if *leaf.get_or_insert(depth) == depth => {
                    values.push(self.json_number()?)
                }
                _ => return None,
            }
            n += 1;
            self.ws();
            match self.next()? {
                b',' => {}
                b']' => break,
                _ => return None,
            }
        }
        match dims[depth] {
            None => dims[depth] = Some(n),
            Some(m) if m == n => {}
            Some(_) => return None,
        }
        Some(())
    }

    /// A number in JSON's grammar (`-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`), correctly
    /// rounded to f64; `None` if malformed or beyond f64's range (serde's "out of range").
    ///
    /// `fast_float2` reads a superset of that grammar, so only what it would let through is
    /// checked here (a byte-by-byte grammar walk doubled the time): no sign or digit-less
    /// integer part (`-.5`, `-+1`), no leading zero (`01`), a digit after the point (`1.`,
    /// `1.e5`), and finite (`-inf`, `-nan`, `1e400`). An exponent without digits, a second
    /// point and the like end the number early and fail at the caller's delimiter check.
    #[inline]
    fn json_number(&mut self) -> Option<f64> {
        let rest = &self.b[self.i..];
        let (v, used): (f64, usize) = fast_float2::parse_partial(rest).ok()?;
        let s = &rest[..used];
        let unsigned = s.strip_prefix(b"-").unwrap_or(s);
        let int_len = unsigned
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(unsigned.len());
        let int_ok = int_len == 1 || (int_len > 1 && unsigned[0] != b'0');
        let frac_ok = unsigned.get(int_len) != Some(&b'.')
            || unsigned.get(int_len + 1).is_some_and(u8::is_ascii_digit);
        if !(int_ok && frac_ok && v.is_finite()) {
            return None;
        }
        self.i += used;
        Some(v)
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
        // SAFETY: SSE2 is part of the x86_64 baseline, so the target feature is present.
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
    // SAFETY: SSE2 is enabled for this function; each load reads 16 bytes inside `s`, as the
    // loop bounds check.
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

    /// A body with a noise array of awkward numbers.
    const NOISE_BODY: &str = r#"{"images":{"c":"AA=="},"state":{"s":[1]},"instruction":"x",
        "noise": [ [0.5, -1e-3, 2, -0, 0.30000001192092896],
                   [1.5E+2, 123456789012345678901, 4.9e-324, -7.25e-1, 0] ]}"#;

    /// Noise arrays are read here, with serde's values (to the bit) and shapes.
    #[test]
    fn noise_arrays_parse_as_serde_parses_them() {
        let body = NOISE_BODY.as_bytes();
        let fast = parse(body).unwrap();
        assert!(matches!(fast.noise, Some(NoiseField::Parsed { .. })));
        assert_eq!(Some(fast), serde_parse(body));
        let three = br#"{"images":{},"state":{},"instruction":"","noise":[[[1,2],[3,4]]]}"#;
        let fast = parse(three).unwrap();
        match &fast.noise {
            Some(NoiseField::Parsed { shape, values }) => {
                assert_eq!(
                    (shape.as_slice(), values.as_slice()),
                    (&[1, 2, 2][..], &[1.0, 2.0, 3.0, 4.0][..])
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Some(fast), serde_parse(three));
        // Odd numbers and shapes: read as serde reads them, or left to serde's value (and its
        // errors, named by `into_observation`).
        for noise in [
            "[[1,2],[3]]",
            "[1,2]",
            "[[1,[2]]]",
            "[[]]",
            "[[1e400]]",
            "[[01]]",
            "[[1.]]",
            "[[[[1]]]]",
            "[[\"1\"]]",
        ] {
            let body =
                format!(r#"{{"images":{{}},"state":{{}},"instruction":"","noise":{noise}}}"#);
            // Whatever the path, the same result as serde, or both refuse.
            assert_eq!(
                parse(body.as_bytes()),
                serde_parse(body.as_bytes()),
                "{noise}"
            );
        }
    }

    /// Random edits of a valid body: whenever the fast path accepts one, serde accepts it
    /// too, with the same result.
    #[test]
    fn never_accepts_what_serde_would_not_or_differently() {
        for base in [BODY, NOISE_BODY] {
            mutations_agree_with_serde(base.as_bytes());
        }
    }

    fn mutations_agree_with_serde(base: &[u8]) {
        let base = base.to_vec();
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
