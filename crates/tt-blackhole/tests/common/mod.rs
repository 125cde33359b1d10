//! Test helpers: a minimal safetensors reader (header JSON + little-endian data), enough to
//! feed the arena builder from the tiny golden checkpoint.

#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::HashMap;

use tt_blackhole::arena::{SourceTensor, TensorData};

pub const TINY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/golden/gr00t-n16-tiny/case1"
);

pub struct SafeTensors {
    pub tensors: HashMap<String, (String, Vec<usize>, Vec<u8>)>,
}

impl SafeTensors {
    pub fn read(path: &str) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        let data = &bytes[8 + n..];
        let mut tensors = HashMap::new();
        for (k, v) in header.as_object().unwrap() {
            if k == "__metadata__" {
                continue;
            }
            let dtype = v["dtype"].as_str().unwrap().to_string();
            let shape = v["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as usize)
                .collect();
            let off = v["data_offsets"].as_array().unwrap();
            let (a, b) = (
                off[0].as_u64().unwrap() as usize,
                off[1].as_u64().unwrap() as usize,
            );
            tensors.insert(k.clone(), (dtype, shape, data[a..b].to_vec()));
        }
        SafeTensors { tensors }
    }

    pub fn source(&self, name: &str) -> Result<SourceTensor<'_>, tt_blackhole::arena::SourceError> {
        let (dtype, shape, bytes) = self
            .tensors
            .get(name)
            .ok_or_else(|| format!("not in checkpoint: {name}"))?;
        let data = match dtype.as_str() {
            "F32" => TensorData::F32Le(Cow::Borrowed(bytes)),
            "BF16" => TensorData::Bf16Le(Cow::Borrowed(bytes)),
            d => return Err(format!("unsupported dtype {d}").into()),
        };
        Ok(SourceTensor {
            shape: shape.clone(),
            data,
        })
    }

    pub fn f32(&self, name: &str) -> Vec<f32> {
        let (dtype, _, bytes) = &self.tensors[name];
        assert_eq!(dtype, "F32");
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

/// Adapter so a borrowed checkpoint can be a `TensorSource`.
pub struct Src<'a>(pub &'a SafeTensors);

impl tt_blackhole::arena::TensorSource for Src<'_> {
    fn tensor(&self, name: &str) -> Result<SourceTensor<'_>, tt_blackhole::arena::SourceError> {
        self.0.source(name)
    }
}

pub fn tiny_dims() -> tt_blackhole::dims::DitDims {
    let cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{TINY}/config_resolved.json")).unwrap(),
    )
    .unwrap();
    tt_blackhole::dims::DitDims::from_config(&cfg, 20).unwrap()
}
