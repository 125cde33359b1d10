use super::*;

const EPOCH: u64 = 1_700_000_000;

/// A layer as the daemon writes one: ustar headers with user names, a directory, a file, a
/// symlink, a long name (GNU extension) and a PAX header carrying every record the
/// normalisation drops (`atime`, `ctime`, `uname`, `gname`), a time and an xattr.
fn layer(build_time: u64) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_ustar();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    dir.set_mtime(build_time);
    dir.set_username("root").unwrap();
    dir.set_groupname("root").unwrap();
    dir.set_cksum();
    b.append_data(&mut dir, "opt/", std::io::empty()).unwrap();

    b.append_pax_extensions([
        ("mtime", format!("{build_time}.123456").as_bytes()),
        ("atime", format!("{build_time}").as_bytes()),
        ("ctime", format!("{build_time}.5").as_bytes()),
        ("uname", b"builder".as_slice()),
        ("gname", b"builders".as_slice()),
        ("SCHILY.xattr.security.capability", b"\x01\x00".as_slice()),
    ])
    .unwrap();
    let mut file = tar::Header::new_ustar();
    file.set_mode(0o644);
    file.set_size(5);
    file.set_mtime(build_time);
    file.set_uid(1000);
    file.set_gid(1000);
    file.set_username("tt").unwrap();
    file.set_cksum();
    b.append_data(&mut file, "opt/lib.so", b"hello".as_slice())
        .unwrap();

    // From the build context: mtime 0, older than any epoch, so it stays.
    let mut old = tar::Header::new_ustar();
    old.set_mode(0o644);
    old.set_size(3);
    old.set_mtime(0);
    old.set_cksum();
    b.append_data(&mut old, "opt/from-context", b"abc".as_slice())
        .unwrap();

    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    link.set_mtime(build_time);
    b.append_link(&mut link, "opt/link", "lib.so").unwrap();

    let long = format!("opt/{}", "n".repeat(150));
    let mut gnu = tar::Header::new_gnu();
    gnu.set_mode(0o600);
    gnu.set_size(2);
    gnu.set_mtime(build_time);
    gnu.set_cksum();
    b.append_data(&mut gnu, &long, b"xy".as_slice()).unwrap();
    b.into_inner().unwrap()
}

fn normalized(bytes: &[u8]) -> (Vec<u8>, LayerStats) {
    let mut out = Vec::new();
    let stats = normalize_layer(bytes, &mut out, EPOCH).unwrap();
    (out, stats)
}

#[test]
fn two_builds_at_different_times_normalise_to_the_same_bytes() {
    let (a, stats) = normalized(&layer(EPOCH + 10));
    let (b, _) = normalized(&layer(EPOCH + 99_999));
    assert_ne!(layer(EPOCH + 10), layer(EPOCH + 99_999));
    assert_eq!(a, b);
    assert_eq!(stats.bytes, a.len() as u64);
    // Seven headers (the PAX and long-name extension headers carry mtime 0); the directory,
    // file, link and long-named file are clamped, the file from the context is not.
    assert_eq!((stats.headers, stats.clamped), (7, 4), "{stats:?}");
    // Idempotent: a normalised layer is its own normal form.
    assert_eq!(normalized(&a).0, a);
}

#[test]
fn headers_are_clamped_and_nameless_and_data_order_and_ids_are_kept() {
    let (out, _) = normalized(&layer(EPOCH + 10));
    let mut archive = tar::Archive::new(out.as_slice());
    let mut seen = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let h = entry.header().clone();
        assert!(h.mtime().unwrap() <= EPOCH, "{path}");
        assert_eq!(h.username().unwrap(), Some(""), "{path}");
        assert_eq!(h.groupname().unwrap(), Some(""), "{path}");
        if path == "opt/lib.so" {
            assert_eq!(h.uid().unwrap(), 1000);
            assert_eq!(h.gid().unwrap(), 1000);
            let pax: Vec<(String, Vec<u8>)> = entry
                .pax_extensions()
                .unwrap()
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    (r.key().unwrap().to_string(), r.value_bytes().to_vec())
                })
                .collect();
            assert_eq!(
                pax,
                vec![
                    ("mtime".to_string(), EPOCH.to_string().into_bytes()),
                    (
                        "SCHILY.xattr.security.capability".to_string(),
                        b"\x01\x00".to_vec()
                    ),
                ]
            );
        }
        if path == "opt/from-context" {
            assert_eq!(h.mtime().unwrap(), 0, "an older time is kept");
        }
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        seen.push((path, data));
    }
    let names: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names[..4],
        ["opt/", "opt/lib.so", "opt/from-context", "opt/link"]
    );
    assert_eq!(names[4], format!("opt/{}", "n".repeat(150)));
    assert_eq!(seen[1].1, b"hello");
    assert_eq!(seen[4].1, b"xy");
}

#[test]
fn a_corrupt_header_is_refused_with_its_offset() {
    let mut bytes = layer(EPOCH + 10);
    bytes[512 + 10] ^= 0x55; // inside the second header block (the PAX header)
    let err = normalize_layer(bytes.as_slice(), Vec::new(), EPOCH).unwrap_err();
    assert!(
        matches!(&err, LayerError::Malformed { offset: 512, detail } if detail.contains("checksum")),
        "{err:?}"
    );
}

#[test]
fn a_truncated_entry_is_an_error() {
    let bytes = layer(EPOCH + 10);
    let err = normalize_layer(&bytes[..512 * 4 + 100], Vec::new(), EPOCH).unwrap_err();
    assert!(
        matches!(err, LayerError::Io(_) | LayerError::Malformed { .. }),
        "{err:?}"
    );
}

#[test]
fn pax_lengths_count_their_own_digits() {
    // 7 bytes of record + 1 digit; 9 + 1 digit = 10 needs 2 digits: 11.
    let mut out = Vec::new();
    push_record(&mut out, b"ab", b"cd");
    assert_eq!(out, b"8 ab=cd\n");
    out.clear();
    push_record(&mut out, b"abc", b"def");
    assert_eq!(out, b"11 abc=def\n");
    out.clear();
    push_record(&mut out, b"k", &[b'v'; 95]);
    assert_eq!(out.len(), 102);
    assert!(out.starts_with(b"102 k="));
}

#[test]
fn numbers_parse_in_octal_and_base_256() {
    assert_eq!(parse_numeric(b"00000000017\0"), Ok(15));
    assert_eq!(parse_numeric(b"     17 \0\0\0\0"), Ok(15));
    assert_eq!(parse_numeric(b"\0\0\0\0"), Ok(0));
    let mut big = [0u8; 12];
    big[0] = 0x80;
    big[11] = 1;
    big[10] = 1;
    assert_eq!(parse_numeric(&big), Ok(257));
    assert!(parse_numeric(b"9\0").is_err());
}

#[test]
fn each_host_or_time_record_is_dropped_from_a_pax_header() {
    // One at a time, so that keeping any one of them is seen on its own.
    for key in ["atime", "ctime", "uname", "gname"] {
        let mut data = Vec::new();
        push_record(&mut data, b"path", b"opt/a");
        push_record(&mut data, key.as_bytes(), b"1700000123.25");
        push_record(&mut data, b"SCHILY.xattr.user.k", b"v");
        let mut kept = Vec::new();
        push_record(&mut kept, b"path", b"opt/a");
        push_record(&mut kept, b"SCHILY.xattr.user.k", b"v");
        assert_eq!(
            normalize_pax(&data, EPOCH).unwrap(),
            kept,
            "the `{key}` record is dropped"
        );
    }
}
