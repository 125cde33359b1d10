//! A hand-written decoder of BuildKit's progress record `moby.buildkit.v1.StatusResponse`
//! (buildkit `api/services/control/control.proto`), which dockerd sends base64-encoded in the
//! `aux` of `{"id":"moby.buildkit.trace"}` items.
//!
//! Only what a build report needs is kept: vertexes (steps), their logs and warnings. Every
//! other field, known to buildkit or added later, is skipped by its wire type, as protobuf
//! requires, so a newer engine still decodes. A known field with the wrong wire type is an
//! error rather than a silent default: it means the schema is not the one this code reads.
//! On the 92 records captured from dockerd 20.10 for issue 27 it gives what the generated
//! prost types give, field for field (through the probe decoder it was derived from).

/// Why a record could not be decoded, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed BuildKit status record at byte {offset} ({field}): {kind}")]
pub struct DecodeError {
    /// Offset of the offending byte from the start of the record.
    pub offset: usize,
    /// The field being read, as `Message.field`, or `Message` while reading a field key.
    pub field: String,
    /// What was wrong there.
    pub kind: DecodeErrorKind,
}

/// The kinds of malformed protobuf this decoder refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The record ended inside a field.
    #[error("truncated")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("varint longer than 64 bits")]
    VarintOverflow,
    /// Wire types 3 and 4 (deprecated groups), 6 and 7 (undefined).
    #[error("unsupported wire type {0}")]
    UnsupportedWireType(u8),
    /// A known field arrived with another wire type than its schema's.
    #[error("wire type {found}, expected {expected}")]
    WrongWireType {
        /// The wire type the schema gives the field.
        expected: u8,
        /// The wire type on the wire.
        found: u8,
    },
    /// A string field that is not UTF-8.
    #[error("string is not UTF-8")]
    Utf8,
}

/// One node of the build graph (`Vertex`): a Dockerfile step or an internal operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vertex {
    /// Content digest: the key logs refer to. The same vertex is reported several times
    /// (queued, started, completed), each time whole.
    pub digest: String,
    /// What it is: `[builder 3/5] RUN …`, `[2/2] RUN …`, `[internal] load build context`, …
    pub name: String,
    /// Served from the build cache.
    pub cached: bool,
    /// Has a start time (absent while queued).
    pub started: bool,
    /// Has a completion time (absent while queued or running).
    pub completed: bool,
    /// Non-empty when the step failed.
    pub error: String,
}

/// A chunk of a vertex's output (`VertexLog`): a `RUN` step's stdout or stderr. Chunks are not
/// line-aligned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VertexLog {
    /// The vertex's digest.
    pub vertex: String,
    /// 1 = stdout, 2 = stderr.
    pub stream: u64,
    /// The raw bytes.
    pub msg: Vec<u8>,
}

/// A frontend warning (`VertexWarning`), e.g. a deprecated instruction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VertexWarning {
    /// The vertex's digest.
    pub vertex: String,
    /// The one-line text.
    pub short: Vec<u8>,
}

/// One progress record (`StatusResponse`): every field is a delta since the previous record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusResponse {
    /// Vertexes that changed state (field 1).
    pub vertexes: Vec<Vertex>,
    /// Output chunks (field 3; field 2, the sub-task progress bars, is skipped).
    pub logs: Vec<VertexLog>,
    /// Warnings (field 4).
    pub warnings: Vec<VertexWarning>,
}

impl StatusResponse {
    /// Decodes one record from its protobuf bytes.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut s = Self::default();
        RESPONSE.read(buf, 0).each(|value| {
            match value.num {
                1 => s.vertexes.push(vertex(value.message(&VERTEX)?)?),
                3 => s.logs.push(vertex_log(value.message(&LOG)?)?),
                4 => s.warnings.push(vertex_warning(value.message(&WARNING)?)?),
                _ => {}
            }
            Ok(())
        })?;
        Ok(s)
    }
}

const VARINT: u8 = 0;
const LEN: u8 = 2;

/// A message type: its name and the names of the fields we read, for error reports.
struct Schema {
    name: &'static str,
    fields: &'static [(u64, &'static str)],
}

static RESPONSE: Schema = Schema {
    name: "StatusResponse",
    fields: &[(1, "vertexes"), (3, "logs"), (4, "warnings")],
};
static VERTEX: Schema = Schema {
    name: "Vertex",
    fields: &[
        (1, "digest"),
        (3, "name"),
        (4, "cached"),
        (5, "started"),
        (6, "completed"),
        (7, "error"),
    ],
};
static LOG: Schema = Schema {
    name: "VertexLog",
    fields: &[(1, "vertex"), (3, "stream"), (4, "msg")],
};
static WARNING: Schema = Schema {
    name: "VertexWarning",
    fields: &[(1, "vertex"), (3, "short")],
};
/// `google.protobuf.Timestamp`: only checked to be a length-delimited field, never read.
static TIMESTAMP: Schema = Schema {
    name: "Timestamp",
    fields: &[],
};

impl Schema {
    fn read<'a>(&'static self, buf: &'a [u8], base: usize) -> Message<'a> {
        Message {
            schema: self,
            buf,
            base,
        }
    }

    /// `Vertex.name`, or `Vertex.9` for a field we do not read.
    fn label(&self, num: u64) -> String {
        match self.fields.iter().find(|(n, _)| *n == num) {
            Some((_, field)) => format!("{}.{field}", self.name),
            None => format!("{}.{num}", self.name),
        }
    }
}

/// A message's bytes and where they start in the record (for error offsets).
struct Message<'a> {
    schema: &'static Schema,
    buf: &'a [u8],
    base: usize,
}

/// One field as read off the wire.
struct Value<'a> {
    schema: &'static Schema,
    num: u64,
    wire: u8,
    /// Record offset of the value (after the key and, for bytes, the length).
    offset: usize,
    varint: u64,
    bytes: &'a [u8],
}

impl<'a> Message<'a> {
    /// Calls `f` with each field, in wire order.
    fn each(
        &self,
        mut f: impl FnMut(Value<'a>) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let mut pos = 0;
        while pos < self.buf.len() {
            let key = self.varint(&mut pos, || self.schema.name.to_string())?;
            let (num, wire) = (key >> 3, (key & 7) as u8);
            let field = || self.schema.label(num);
            let mut value = Value {
                schema: self.schema,
                num,
                wire,
                offset: self.base + pos,
                varint: 0,
                bytes: &[],
            };
            match wire {
                VARINT => value.varint = self.varint(&mut pos, field)?,
                1 => self.take(&mut pos, 8, field)?,
                LEN => {
                    let len = self.varint(&mut pos, field)?;
                    let start = pos;
                    self.take(&mut pos, usize::try_from(len).unwrap_or(usize::MAX), field)?;
                    value.bytes = &self.buf[start..pos];
                    value.offset = self.base + start;
                }
                5 => self.take(&mut pos, 4, field)?,
                other => {
                    let kind = DecodeErrorKind::UnsupportedWireType(other);
                    return Err(self.error(pos, field(), kind));
                }
            }
            f(value)?;
        }
        Ok(())
    }

    fn varint(&self, pos: &mut usize, field: impl Fn() -> String) -> Result<u64, DecodeError> {
        let start = *pos;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(*pos) else {
                return Err(self.error(*pos, field(), DecodeErrorKind::Truncated));
            };
            *pos += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(start, field(), DecodeErrorKind::VarintOverflow))
    }

    fn take(
        &self,
        pos: &mut usize,
        n: usize,
        field: impl Fn() -> String,
    ) -> Result<(), DecodeError> {
        if self.buf.len() - *pos < n {
            return Err(self.error(self.buf.len(), field(), DecodeErrorKind::Truncated));
        }
        *pos += n;
        Ok(())
    }

    fn error(&self, pos: usize, field: String, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            offset: self.base + pos,
            field,
            kind,
        }
    }
}

impl<'a> Value<'a> {
    fn check(&self, expected: u8) -> Result<(), DecodeError> {
        if self.wire == expected {
            return Ok(());
        }
        Err(DecodeError {
            offset: self.offset,
            field: self.schema.label(self.num),
            kind: DecodeErrorKind::WrongWireType {
                expected,
                found: self.wire,
            },
        })
    }

    fn message(&self, schema: &'static Schema) -> Result<Message<'a>, DecodeError> {
        self.check(LEN)?;
        Ok(schema.read(self.bytes, self.offset))
    }

    fn bytes(&self) -> Result<Vec<u8>, DecodeError> {
        self.check(LEN)?;
        Ok(self.bytes.to_vec())
    }

    fn string(&self) -> Result<String, DecodeError> {
        self.check(LEN)?;
        String::from_utf8(self.bytes.to_vec()).map_err(|e| DecodeError {
            offset: self.offset + e.utf8_error().valid_up_to(),
            field: self.schema.label(self.num),
            kind: DecodeErrorKind::Utf8,
        })
    }

    fn varint(&self) -> Result<u64, DecodeError> {
        self.check(VARINT)?;
        Ok(self.varint)
    }
}

fn vertex(m: Message<'_>) -> Result<Vertex, DecodeError> {
    let mut v = Vertex::default();
    m.each(|value| {
        match value.num {
            1 => v.digest = value.string()?,
            3 => v.name = value.string()?,
            4 => v.cached = value.varint()? != 0,
            // Timestamps: only whether they are there matters to a report.
            5 => v.started = value.message(&TIMESTAMP).map(|_| true)?,
            6 => v.completed = value.message(&TIMESTAMP).map(|_| true)?,
            7 => v.error = value.string()?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(v)
}

fn vertex_log(m: Message<'_>) -> Result<VertexLog, DecodeError> {
    let mut l = VertexLog::default();
    m.each(|value| {
        match value.num {
            1 => l.vertex = value.string()?,
            3 => l.stream = value.varint()?,
            4 => l.msg = value.bytes()?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(l)
}

fn vertex_warning(m: Message<'_>) -> Result<VertexWarning, DecodeError> {
    let mut w = VertexWarning::default();
    m.each(|value| {
        match value.num {
            1 => w.vertex = value.string()?,
            3 => w.short = value.bytes()?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(w)
}

/// Protobuf encoding by hand, for the tests of this decoder and of the event mapping.
#[cfg(test)]
pub(crate) mod encode {
    /// A varint.
    pub fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    /// A varint field.
    pub fn int(num: u64, v: u64) -> Vec<u8> {
        let mut out = varint(num << 3);
        out.extend(varint(v));
        out
    }

    /// A length-delimited field (bytes, string, message).
    pub fn bytes(num: u64, body: &[u8]) -> Vec<u8> {
        let mut out = varint((num << 3) | 2);
        out.extend(varint(body.len() as u64));
        out.extend_from_slice(body);
        out
    }

    /// A `Vertex` record field of a `StatusResponse`.
    pub fn vertex(digest: &str, name: &str, started: bool, cached: bool, error: &str) -> Vec<u8> {
        let mut v = bytes(1, digest.as_bytes());
        v.extend(bytes(3, name.as_bytes()));
        if cached {
            v.extend(int(4, 1));
        }
        if started {
            v.extend(bytes(5, &int(1, 1_764_750_000)));
        }
        if !error.is_empty() {
            v.extend(bytes(6, &int(1, 1_764_750_001)));
            v.extend(bytes(7, error.as_bytes()));
        }
        bytes(1, &v)
    }

    /// A `VertexLog` record field of a `StatusResponse`.
    pub fn log(digest: &str, stream: u64, msg: &[u8]) -> Vec<u8> {
        let mut l = bytes(1, digest.as_bytes());
        l.extend(int(3, stream));
        l.extend(bytes(4, msg));
        bytes(3, &l)
    }
}

#[cfg(test)]
mod tests {
    use super::encode::{bytes, int, log, varint, vertex};
    use super::*;

    #[test]
    fn decodes_a_vertex_with_its_name_cache_state_and_error() {
        let name = "[stage-0 2/2] RUN sh -c 'exit 3'";
        let mut record = vertex("sha256:aa", name, true, true, "exit code: 3");
        record.extend(vertex(
            "sha256:bb",
            "[internal] load build context",
            false,
            false,
            "",
        ));
        let s = StatusResponse::decode(&record).unwrap();
        assert_eq!(
            s.vertexes,
            vec![
                Vertex {
                    digest: "sha256:aa".into(),
                    name: name.into(),
                    cached: true,
                    started: true,
                    completed: true,
                    error: "exit code: 3".into(),
                },
                Vertex {
                    digest: "sha256:bb".into(),
                    name: "[internal] load build context".into(),
                    ..Vertex::default()
                },
            ]
        );
        assert!(s.logs.is_empty() && s.warnings.is_empty());
    }

    #[test]
    fn skips_unknown_fields_of_every_wire_type() {
        let mut v = bytes(1, b"sha256:aa");
        v.extend(bytes(2, b"sha256:input")); // inputs: known to buildkit, not read here
        v.extend(int(99, 7)); // a varint field from a newer engine
        v.extend(varint((98 << 3) | 1)); // fixed64
        v.extend([1, 2, 3, 4, 5, 6, 7, 8]);
        v.extend(varint((97 << 3) | 5)); // fixed32
        v.extend([1, 2, 3, 4]);
        v.extend(bytes(8, b"progress group")); // a message we do not read
        v.extend(bytes(3, b"[1/1] RUN true"));
        let mut record = bytes(1, &v);
        record.extend(bytes(2, b"a VertexStatus, skipped whole"));
        record.extend(bytes(15, b"a field StatusResponse does not have yet"));
        let s = StatusResponse::decode(&record).unwrap();
        assert_eq!(s.vertexes.len(), 1);
        assert_eq!(s.vertexes[0].digest, "sha256:aa");
        assert_eq!(s.vertexes[0].name, "[1/1] RUN true");
    }

    #[test]
    fn decodes_log_chunks_as_raw_bytes() {
        let mut record = log("sha256:aa", 1, b"hello wor");
        record.extend(log("sha256:aa", 2, b"\xffnot utf-8\n"));
        let s = StatusResponse::decode(&record).unwrap();
        assert_eq!(s.logs.len(), 2);
        assert_eq!(s.logs[0].msg, b"hello wor");
        assert_eq!((s.logs[1].stream, s.logs[1].msg[0]), (2, 0xff));
    }

    #[test]
    fn a_truncated_varint_is_refused_with_its_offset_and_field() {
        // Vertex.cached's value is a varint whose continuation bit runs off the end.
        let mut v = bytes(1, b"sha256:aa"); // 11 bytes
        v.extend([0x20, 0x80]); // key 4/varint, then a truncated varint
        let record = bytes(1, &v); // 2 bytes of key and length before the vertex
        let err = StatusResponse::decode(&record).unwrap_err();
        assert_eq!(
            err,
            DecodeError {
                offset: 2 + 11 + 2,
                field: "Vertex.cached".into(),
                kind: DecodeErrorKind::Truncated,
            }
        );
        assert_eq!(
            err.to_string(),
            "malformed BuildKit status record at byte 15 (Vertex.cached): truncated"
        );
        let long = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let err = StatusResponse::decode(&long).unwrap_err();
        assert_eq!((err.offset, err.kind), (1, DecodeErrorKind::VarintOverflow));
    }

    #[test]
    fn lengths_past_the_end_groups_wrong_wire_types_and_bad_utf8_are_refused() {
        let err = StatusResponse::decode(&[0x0a, 5, 0]).unwrap_err();
        assert_eq!(
            (err.offset, err.field.as_str()),
            (3, "StatusResponse.vertexes")
        );
        assert_eq!(err.kind, DecodeErrorKind::Truncated);
        let err = StatusResponse::decode(&[0x0b]).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::UnsupportedWireType(3));
        // Vertex.name sent as a varint.
        let err = StatusResponse::decode(&bytes(1, &int(3, 1))).unwrap_err();
        assert_eq!(
            (err.offset, err.field.as_str(), err.kind),
            (
                3,
                "Vertex.name",
                DecodeErrorKind::WrongWireType {
                    expected: 2,
                    found: 0
                }
            )
        );
        let err = StatusResponse::decode(&bytes(1, &bytes(7, b"ok\xff"))).unwrap_err();
        assert_eq!(
            (err.offset, err.field.as_str(), err.kind),
            (6, "Vertex.error", DecodeErrorKind::Utf8)
        );
    }
}
