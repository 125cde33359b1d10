//! The golden case (NVIDIA's reference N1.6 on the tiny config, `../shared/golden`) as the
//! megakernel's tests and the device crate's read it: its directory, inputs and taps, and the
//! PCC they are compared by. Test support: `gr00t-device` includes this file by path, so that
//! both crates' tests read the oracle one way.

use std::path::PathBuf;

use gr00t_runtime::policy::ModelInputs;
use safetensors::{Dtype, SafeTensors};

pub(crate) fn case_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n16-tiny/case1"
    ))
}

fn read(name: &str) -> Vec<u8> {
    let p = case_dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn f32s(st: &SafeTensors<'_>, name: &str) -> (Vec<usize>, Vec<f32>) {
    let v = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(v.dtype(), Dtype::F32, "{name}");
    (
        v.shape().to_vec(),
        v.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

fn i64s(st: &SafeTensors<'_>, name: &str) -> Vec<i64> {
    let v = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    v.data()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The golden tap `name` (f32): its shape and values.
pub(crate) fn golden_tap(name: &str) -> (Vec<usize>, Vec<f32>) {
    let taps = read("taps.safetensors");
    f32s(&SafeTensors::deserialize(&taps).unwrap(), name)
}

pub(crate) fn golden_inputs() -> ModelInputs {
    let taps = read("taps.safetensors");
    let obs = read("observation.safetensors");
    let (taps, obs) = (
        SafeTensors::deserialize(&taps).unwrap(),
        SafeTensors::deserialize(&obs).unwrap(),
    );
    let (shape, px) = f32s(&taps, "input.pixel_values");
    ModelInputs {
        input_ids: i64s(&taps, "input.input_ids")
            .into_iter()
            .map(|v| v as u32)
            .collect(),
        pixel_values: vec![px],
        image_hw: (shape[2], shape[3]),
        state: f32s(&taps, "input.state").1,
        embodiment_id: i64s(&taps, "input.embodiment_id")[0] as usize,
        noise: f32s(&obs, "noise").1,
    }
}

pub(crate) fn pcc(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (
        a.iter().map(|&v| v as f64).sum::<f64>() / n,
        b.iter().map(|&v| v as f64).sum::<f64>() / n,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    sab / (saa.sqrt() * sbb.sqrt())
}
