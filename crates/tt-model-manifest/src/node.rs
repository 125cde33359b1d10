//! A YAML document as a tree of nodes that remember where they came from.
//!
//! serde-saphyr has no value DOM, so we build one through its [`Spanned`] wrapper: every node
//! (keys included) carries its [`Pos`]. The authoring types are then decoded from this tree by
//! hand ([`crate::decode`]), which lets us report *every* problem with its location, dotted path
//! and a suggestion, instead of serde's first error.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A position in the manifest text: 1-based line and column (in characters), plus the byte
/// offset and length of the node when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub col: u32,
    /// Byte offset of the node's first character, when known.
    #[serde(skip)]
    pub offset: Option<usize>,
    /// Byte length of the node's text, when known.
    #[serde(skip)]
    pub len: Option<usize>,
}

impl Pos {
    /// The start of the file.
    pub const START: Pos = Pos {
        line: 1,
        col: 1,
        offset: Some(0),
        len: None,
    };

    /// A position from a line and column alone.
    pub fn at(line: u32, col: u32) -> Pos {
        Pos {
            line,
            col,
            offset: None,
            len: None,
        }
    }

    fn from_spanned<T>(s: &Spanned<T>) -> Pos {
        let loc = s.referenced;
        if loc.line() == 0 {
            return Pos::START;
        }
        let span = loc.span();
        Pos {
            line: u32::try_from(loc.line()).unwrap_or(u32::MAX),
            col: u32::try_from(loc.column()).unwrap_or(u32::MAX),
            offset: span.byte_offset().and_then(|o| usize::try_from(o).ok()),
            len: span.byte_len().and_then(|l| usize::try_from(l).ok()),
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One YAML node and its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub pos: Pos,
    /// For a mapping value: where its key starts (errors about a whole block point there).
    pub key_pos: Option<Pos>,
    /// The value.
    pub value: Value,
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `~`, `null` or an empty value.
    Null,
    /// A boolean (YAML 1.2 core schema: `true`/`false`).
    Bool(bool),
    /// An integer.
    Int(i64),
    /// An unsigned integer too large for `i64`.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order.
    Map(Vec<(Node, Node)>),
}

impl Value {
    /// What the value is, for messages ("a string", "a list", …).
    pub fn describe(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::UInt(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// Where errors about this node point: its key for a block, else the node itself.
    pub fn anchor(&self) -> Pos {
        match (&self.value, self.key_pos) {
            (Value::Map(_) | Value::Seq(_) | Value::Null, Some(key)) => key,
            _ => self.pos,
        }
    }

    /// The mapping entries, if this is a mapping.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The value under `key`, if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .find(|(k, _)| matches!(&k.value, Value::Str(s) if s == key))
            .map(|(_, v)| v)
    }

    /// The node at a dotted path such as `serve_profiles[1].hardware` (best effort: stops at the
    /// deepest node that exists, so a diagnostic about a missing key points at its parent).
    pub fn locate(&self, path: &str) -> &Node {
        let mut node = self;
        for segment in path_segments(path) {
            let next = match segment {
                Segment::Key(key) => node.get(key),
                Segment::Index(i) => match &node.value {
                    Value::Seq(items) => items.get(i),
                    _ => None,
                },
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node
    }

    /// The scalar as the author wrote it, when the target type is a string: a plain `3.10`
    /// stays `"3.10"` (not the float 3.1), `yes` stays `"yes"`. `None` for null and collections.
    pub fn scalar_text(&self, src: &str) -> Option<String> {
        match &self.value {
            Value::Str(s) => Some(s.clone()),
            Value::Bool(_) | Value::Int(_) | Value::UInt(_) | Value::Float(_) => {
                Some(raw_plain_scalar(src, self.pos).unwrap_or_else(|| self.fallback_text()))
            }
            Value::Null | Value::Seq(_) | Value::Map(_) => None,
        }
    }

    fn fallback_text(&self) -> String {
        match &self.value {
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Float(f) => f.to_string(),
            _ => String::new(),
        }
    }

    /// The node as JSON (for open blocks such as `runtime` that travel to the wire verbatim).
    pub fn to_json(&self, src: &str) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::UInt(u) => J::from(*u),
            // A version-like float keeps the author's text (`0.10` is a version, not 0.1);
            // other floats (`1.0`, `1e3`, `0.5`) stay numbers.
            Value::Float(f) => match self.scalar_text(src) {
                Some(text) if is_version_like(&text) => J::String(text),
                _ => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            },
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(|n| n.to_json(src)).collect()),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let key = k.scalar_text(src).unwrap_or_else(|| "null".to_owned());
                        (key, v.to_json(src))
                    })
                    .collect(),
            ),
        }
    }
}

/// `digits.digits` whose fraction has two or more digits and ends in 0 (`0.10`, `3.10`): a
/// number would lose the trailing zero.
fn is_version_like(text: &str) -> bool {
    let Some((int, frac)) = text.split_once('.') else {
        return false;
    };
    !int.is_empty()
        && int.chars().all(|c| c.is_ascii_digit())
        && frac.len() >= 2
        && frac.chars().all(|c| c.is_ascii_digit())
        && frac.ends_with('0')
}

/// One step of a dotted path.
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn path_segments(path: &str) -> impl Iterator<Item = Segment<'_>> {
    path.split('.').filter(|s| !s.is_empty()).flat_map(|part| {
        let (key, rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        let key = (!key.is_empty()).then_some(Segment::Key(key));
        let indices = rest
            .split('[')
            .filter_map(|i| i.trim_end_matches(']').parse().ok())
            .map(Segment::Index);
        key.into_iter().chain(indices)
    })
}

/// The text of a plain scalar starting at `pos`: up to whitespace, a flow indicator or a comment.
fn raw_plain_scalar(src: &str, pos: Pos) -> Option<String> {
    let start = pos.offset?;
    let rest = src.get(start..)?;
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, ',' | ']' | '}' | '#'))
        .unwrap_or(rest.len());
    let text = &rest[..end];
    (!text.is_empty() && !text.starts_with(['"', '\''])).then(|| text.to_owned())
}

/// A node as serde-saphyr hands it to us (positions of children included).
struct RawNode(Value);

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor).map(RawNode)
    }
}

fn spanned_to_node(s: Spanned<RawNode>) -> Node {
    Node {
        pos: Pos::from_spanned(&s),
        key_pos: None,
        value: s.value.0,
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(RawVisitor)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::Int)
            .or_else(|_| u64::try_from(v).map(Value::UInt))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::UInt(v), Value::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        u64::try_from(v)
            .map(|v| i64::try_from(v).map_or(Value::UInt(v), Value::Int))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        String::from_utf8(v.to_vec())
            .map(Value::Str)
            .map_err(|_| E::custom("binary data is not allowed in a manifest"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<RawNode>>()? {
            items.push(spanned_to_node(item));
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<RawNode>>()? {
            let key = spanned_to_node(key);
            let mut value = spanned_to_node(map.next_value::<Spanned<RawNode>>()?);
            value.key_pos = Some(key.pos);
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }
}

/// Parses YAML text into a [`Node`] tree with serde-saphyr under the given options.
pub(crate) fn parse_tree(
    src: &str,
    options: serde_saphyr::Options,
) -> Result<Node, serde_saphyr::Error> {
    let root: Spanned<RawNode> = serde_saphyr::from_str_with_options(src, options)?;
    Ok(spanned_to_node(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(src: &str) -> Node {
        parse_tree(src, serde_saphyr::options! { strict_booleans: true }).expect("valid yaml")
    }

    #[test]
    fn floats_to_json() {
        let src = "a: 1.0\nb: 1e3\nc: 0.5\nd: 0.10\n";
        assert_eq!(
            tree(src).to_json(src),
            serde_json::json!({"a": 1.0, "b": 1000.0, "c": 0.5, "d": "0.10"})
        );
    }

    #[test]
    fn positions_and_paths() {
        let src = "a: 1\nb:\n  - x\n  - y: 3.10\n";
        let root = tree(src);
        let y = root.locate("b[1].y");
        assert_eq!((y.pos.line, y.pos.col), (4, 8));
        assert_eq!(y.scalar_text(src).as_deref(), Some("3.10"));
        assert_eq!(y.to_json(src), serde_json::json!("3.10"));
        assert_eq!(root.locate("b[1].missing").pos, root.locate("b[1]").pos);
        let b_key = root
            .get("b")
            .and_then(|b| b.key_pos)
            .expect("a mapping value knows its key");
        assert_eq!((b_key.line, b_key.col), (2, 1));
    }
}
