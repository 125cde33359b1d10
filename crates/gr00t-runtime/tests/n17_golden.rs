//! Reading `shared/golden/gr00t-n17-tiny/case1` (NVIDIA's reference N1.7 in f32 on a tiny
//! config) and comparing against its taps with the README's tolerance.
#![allow(dead_code)]

use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `shared/golden/gr00t-n17-tiny`.
pub fn golden_root() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n17-tiny"
    ))
}

/// The case folder (checkpoint, observation, taps).
pub fn case_dir() -> PathBuf {
    golden_root().join("case1")
}

/// The backbone's processor files (tokenizer, chat template, image-processor config).
pub fn processor_dir() -> PathBuf {
    golden_root().join("cosmos_reason2_tiny")
}

/// The tensors of one safetensors file, by dtype.
#[derive(Default)]
pub struct Tensors {
    /// f32 tensors: shape and values.
    pub f32s: HashMap<String, (Vec<usize>, Vec<f32>)>,
    /// i64 tensors: shape and values.
    pub i64s: HashMap<String, (Vec<usize>, Vec<i64>)>,
    /// u8 tensors (images, HWC RGB): shape and values.
    pub u8s: HashMap<String, (Vec<usize>, Vec<u8>)>,
}

/// Reads every f32, i64 and u8 tensor of `path`.
pub fn read(path: &Path) -> Tensors {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut t = Tensors::default();
    for (name, v) in st.tensors() {
        let shape = v.shape().to_vec();
        match v.dtype() {
            Dtype::F32 => {
                let d = v.data().chunks_exact(4);
                let d = d.map(|c| f32::from_le_bytes(c.try_into().unwrap()));
                t.f32s.insert(name, (shape, d.collect()));
            }
            Dtype::I64 => {
                let d = v.data().chunks_exact(8);
                let d = d.map(|c| i64::from_le_bytes(c.try_into().unwrap()));
                t.i64s.insert(name, (shape, d.collect()));
            }
            Dtype::U8 => {
                t.u8s.insert(name, (shape, v.data().to_vec()));
            }
            other => panic!("{}: {name}: unexpected dtype {other:?}", path.display()),
        }
    }
    t
}

/// case1's `taps.safetensors`.
pub fn taps() -> Tensors {
    read(&case_dir().join("taps.safetensors"))
}

/// case1's `observation.safetensors` (raw frames, raw state, noise).
pub fn observation() -> Tensors {
    read(&case_dir().join("observation.safetensors"))
}

/// The README's tolerance, |a − b| ≤ 1e-4 + 1e-4·|b|: `None` when every value is within it,
/// else a line naming the tap, the worst index and the values there.
pub fn mismatch(name: &str, got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!(
            "{name}: {} values, golden {}",
            got.len(),
            want.len()
        ));
    }
    let mut worst: Option<(usize, f32)> = None;
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let excess = (a - b).abs() - (1e-4 + 1e-4 * b.abs());
        // NaN counts as out of tolerance (a comparison with it is false).
        let out = excess > 0.0 || excess.is_nan();
        if out && worst.is_none_or(|(_, w)| excess > w || excess.is_nan()) {
            worst = Some((i, excess));
        }
    }
    worst.map(|(i, _)| format!("{name}[{i}]: {} vs golden {}", got[i], want[i]))
}

/// Panics with every tap of `pairs` (name, got, golden) that is out of tolerance.
pub fn assert_all_close<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [f32], &'a [f32])>) {
    let failures: Vec<String> = pairs
        .into_iter()
        .filter_map(|(n, g, w)| mismatch(n, g, w))
        .collect();
    assert!(
        failures.is_empty(),
        "{} taps out of tolerance:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_tolerance_catches_one_value_out_and_a_nan() {
    assert!(mismatch("t", &[1.0, 2.0], &[1.0, 2.0]).is_none());
    assert!(mismatch("t", &[1.0, 2.0005], &[1.0, 2.0]).is_some_and(|m| m.contains("t[1]")));
    assert!(mismatch("t", &[f32::NAN], &[0.0]).is_some());
    assert!(mismatch("t", &[1.0], &[1.0, 2.0]).is_some());
}
