//! One layer tar normalised, header by header, as it streams.
//!
//! The classic builder's layer tars differ between two builds of the same inputs only in
//! their headers: every file a `RUN` step writes, and every directory a step touches, carries
//! the wall-clock time of the build. Entry order is already stable (the daemon walks the layer
//! in lexical order), so it is kept, and so is every byte of file data. What changes:
//!
//! * `mtime` is clamped to the epoch: a time after it becomes the epoch, an earlier one (a file
//!   from our context, mtime 0) stays, as BuildKit's `rewrite-timestamp` does;
//! * the user and group *names* are cleared (the numeric ids stay, and they are what the
//!   engine applies): the daemon fills the names from its own host's user database, so the
//!   same layer built on two machines could differ in them;
//! * in PAX extended headers, `mtime` is clamped the same way and `atime`, `ctime`, `uname`
//!   and `gname` records are dropped.
//!
//! Editing headers in place, rather than re-serialising entries with a tar library, keeps
//! everything we do not mean to touch (long-name extensions, xattrs, hard links, device
//! numbers, whiteouts) exactly as the daemon wrote it.

use std::io::{self, Read, Write};

/// The size of a tar block.
const BLOCK: usize = 512;
const SIZE: std::ops::Range<usize> = 124..136;
const MTIME: std::ops::Range<usize> = 136..148;
const CHKSUM: std::ops::Range<usize> = 148..156;
const TYPEFLAG: usize = 156;
const MAGIC: std::ops::Range<usize> = 257..263;
const UNAME: std::ops::Range<usize> = 265..297;
const GNAME: std::ops::Range<usize> = 297..329;
/// PAX headers larger than this are refused rather than held in memory (the daemon writes a
/// few hundred bytes: a long name, xattrs).
const MAX_PAX: u64 = 1 << 24;

/// Why a layer could not be normalised.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// Reading the input or writing the output failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The input is not a tar stream we can read.
    #[error("at byte {offset}: {detail}")]
    Malformed {
        /// Offset of the offending header block in the input.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
}

/// What a normalisation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerStats {
    /// Header blocks read (entries and their extension headers).
    pub headers: u64,
    /// Headers whose mtime was later than the epoch.
    pub clamped: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Copies the tar stream `input` to `out` with its headers normalised for `epoch` (seconds
/// since 1970). Data blocks and the end-of-archive padding are copied unchanged.
pub fn normalize_layer<R: Read, W: Write>(
    mut input: R,
    out: W,
    epoch: u64,
) -> Result<LayerStats, LayerError> {
    let mut out = crate::docker_archive::CountingWriter { inner: out, n: 0 };
    let mut stats = LayerStats::default();
    let mut offset = 0u64;
    let mut header = [0u8; BLOCK];
    loop {
        if !read_block(&mut input, &mut header)? {
            break; // a stream without its end marker: what we copied is all there is
        }
        if header.iter().all(|&b| b == 0) {
            // End of archive: the marker and any padding after it, unchanged.
            out.write_all(&header)?;
            io::copy(&mut input, &mut out)?;
            break;
        }
        let malformed = |detail: String| LayerError::Malformed { offset, detail };
        if checksum(&header) != parse_numeric(&header[CHKSUM]).map_err(&malformed)? {
            return Err(malformed("the header checksum does not match".into()));
        }
        stats.headers += 1;
        let size = parse_numeric(&header[SIZE]).map_err(&malformed)?;
        if parse_numeric(&header[MTIME]).map_err(&malformed)? > epoch {
            write_octal(&mut header[MTIME], epoch);
            stats.clamped += 1;
        }
        if matches!(&header[MAGIC], b"ustar\0" | b"ustar ") {
            header[UNAME].fill(0);
            header[GNAME].fill(0);
        }
        let data_blocks = size.div_ceil(BLOCK as u64) * BLOCK as u64;
        match header[TYPEFLAG] {
            b'x' | b'g' => {
                if size > MAX_PAX {
                    return Err(malformed(format!("a PAX header of {size} bytes")));
                }
                let mut data = vec![0u8; data_blocks as usize];
                input.read_exact(&mut data)?;
                data.truncate(size as usize);
                let records = normalize_pax(&data, epoch).map_err(&malformed)?;
                write_octal(&mut header[SIZE], records.len() as u64);
                seal(&mut header);
                out.write_all(&header)?;
                out.write_all(&records)?;
                let pad = records.len().div_ceil(BLOCK) * BLOCK - records.len();
                out.write_all(&[0u8; BLOCK][..pad])?;
            }
            _ => {
                seal(&mut header);
                out.write_all(&header)?;
                let copied = io::copy(&mut (&mut input).take(data_blocks), &mut out)?;
                if copied != data_blocks {
                    return Err(malformed(format!(
                        "the entry's data ends after {copied} of {data_blocks} bytes"
                    )));
                }
            }
        }
        offset += BLOCK as u64 + data_blocks;
    }
    out.flush()?;
    stats.bytes = out.n;
    Ok(stats)
}

/// Reads one block; `false` at a clean end of input.
fn read_block<R: Read>(input: &mut R, block: &mut [u8; BLOCK]) -> Result<bool, LayerError> {
    let mut filled = 0;
    while filled < BLOCK {
        match input.read(&mut block[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => {
                return Err(LayerError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the tar stream ends inside a block",
                )));
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// The header checksum: the unsigned byte sum with the checksum field counted as spaces.
fn checksum(header: &[u8; BLOCK]) -> u64 {
    header
        .iter()
        .enumerate()
        .map(|(i, &b)| if CHKSUM.contains(&i) { b' ' } else { b } as u64)
        .sum()
}

/// Writes the checksum as the daemon (Go's archive/tar) does: six octal digits, NUL, space.
fn seal(header: &mut [u8; BLOCK]) {
    let sum = checksum(header);
    let text = format!("{sum:06o}\0 ");
    header[CHKSUM].copy_from_slice(text.as_bytes());
}

/// A numeric header field: octal text (NUL- or space-terminated), or base-256 when the high
/// bit of the first byte is set (GNU, for values octal cannot hold).
fn parse_numeric(field: &[u8]) -> Result<u64, String> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        if field[0] == 0xff {
            return Ok(0); // negative (a time before 1970): earlier than any epoch
        }
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            v = v
                .checked_mul(256)
                .and_then(|v| v.checked_add(u64::from(b)))
                .ok_or("a base-256 number overflows 64 bits")?;
        }
        return Ok(v);
    }
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, 8).map_err(|_| format!("`{text}` is not an octal number"))
}

/// Writes `value` as zero-padded octal with a NUL terminator (the field's width minus one
/// digits). Callers pass values that fit: an epoch (11 digits last until 2242) or a PAX size.
fn write_octal(field: &mut [u8], value: u64) {
    let text = format!("{value:0width$o}\0", width = field.len() - 1);
    debug_assert_eq!(text.len(), field.len(), "{value} fits its field");
    field.copy_from_slice(&text.as_bytes()[..field.len()]);
}

/// A PAX header's records (`<len> <key>=<value>\n`) with `mtime` clamped and the records
/// that vary between builds or hosts dropped; the others are kept byte for byte, in order.
fn normalize_pax(data: &[u8], epoch: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or("a PAX record without a length")?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("a PAX record length is not a number")?;
        if len <= space + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err("a PAX record's length does not match it".into());
        }
        let record = &rest[space + 1..len - 1];
        rest = &rest[len..];
        let eq = record
            .iter()
            .position(|&b| b == b'=')
            .ok_or("a PAX record without `=`")?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"atime" | b"ctime" | b"uname" | b"gname" => {}
            b"mtime" => {
                let secs = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.split('.').next())
                    .and_then(|s| s.parse::<i64>().ok())
                    .ok_or("a PAX mtime is not a number")?;
                if secs >= 0 && secs as u64 > epoch {
                    push_record(&mut out, b"mtime", epoch.to_string().as_bytes());
                } else {
                    push_record(&mut out, key, value);
                }
            }
            _ => push_record(&mut out, key, value),
        }
    }
    Ok(out)
}

/// Appends one PAX record; its length prefix counts its own digits.
fn push_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let body = key.len() + value.len() + 3; // space, `=`, newline
    let mut len = body + body.to_string().len();
    if len.to_string().len() != body.to_string().len() {
        len = body + len.to_string().len();
    }
    out.extend_from_slice(len.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    out.push(b'=');
    out.extend_from_slice(value);
    out.push(b'\n');
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
