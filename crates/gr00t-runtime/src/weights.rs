//! Checkpoint tensors by their real names, from (sharded) safetensors.
//!
//! Shards are memory-mapped; bf16 and f32 tensors stay in the mapping when their offset is
//! aligned for their element type (the common case) and are copied otherwise. Nothing is widened
//! here: the GEMM widens bf16 weights inside its kernel.

use half::bf16;
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a weight could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// The I/O cause is part of the message and not also a `source()`, so a report that
    /// walks the chain prints it once.
    #[error("{path}: {cause}")]
    Io {
        /// The file that could not be read or mapped.
        path: PathBuf,
        /// The underlying I/O error.
        cause: std::io::Error,
    },
    /// A checkpoint file is malformed (bad index JSON, an unreadable safetensors header).
    #[error("{path}: {message}")]
    Format {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The model asked for a tensor the checkpoint does not hold.
    #[error("missing tensor `{name}` (expected shape {expected:?})")]
    Missing {
        /// Checkpoint name of the tensor.
        name: String,
        /// Shape the model expected.
        expected: Vec<usize>,
    },
    /// The tensor exists with another shape than the model expects.
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    Shape {
        /// Checkpoint name of the tensor.
        name: String,
        /// Shape the model expects.
        expected: Vec<usize>,
        /// Shape stored in the checkpoint.
        found: Vec<usize>,
    },
    /// The tensor is stored in a dtype other than F32 or BF16.
    #[error("tensor `{name}` has dtype {dtype}, only F32 and BF16 are supported")]
    Dtype {
        /// Checkpoint name of the tensor.
        name: String,
        /// The safetensors dtype found, e.g. `F16`.
        dtype: String,
    },
}

/// Element type of a stored tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    /// IEEE single precision (safetensors `F32`).
    F32,
    /// bfloat16 (safetensors `BF16`).
    Bf16,
}

#[derive(Debug, Clone)]
enum Storage {
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
    },
    F32(Arc<Vec<f32>>),
    Bf16(Arc<Vec<bf16>>),
}

/// A borrowed view of tensor data.
#[derive(Debug, Clone, Copy)]
pub enum Data<'a> {
    /// f32 elements.
    F32(&'a [f32]),
    /// bf16 elements.
    Bf16(&'a [bf16]),
}

impl<'a> Data<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::F32(d) => d.len(),
            Data::Bf16(d) => d.len(),
        }
    }
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sub-range in elements.
    pub fn slice(&self, start: usize, len: usize) -> Data<'a> {
        match self {
            Data::F32(d) => Data::F32(&d[start..start + len]),
            Data::Bf16(d) => Data::Bf16(&d[start..start + len]),
        }
    }
    /// Widens to an owned f32 vector.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match self {
            Data::F32(d) => d.to_vec(),
            Data::Bf16(d) => d.iter().map(|v| v.to_f32()).collect(),
        }
    }
}

/// One tensor: shape, dtype and (mapped or owned) storage. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Tensor {
    shape: Vec<usize>,
    dtype: DType,
    storage: Storage,
}

impl Tensor {
    /// An owned f32 tensor; panics if `data.len()` is not the product of `shape`.
    pub fn from_f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Self {
            shape,
            dtype: DType::F32,
            storage: Storage::F32(Arc::new(data)),
        }
    }
    /// An owned bf16 tensor; panics if `data.len()` is not the product of `shape`.
    pub fn from_bf16(shape: Vec<usize>, data: Vec<bf16>) -> Self {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Self {
            shape,
            dtype: DType::Bf16,
            storage: Storage::Bf16(Arc::new(data)),
        }
    }
    /// Dimensions, outermost first (torch order).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Stored element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Number of elements (product of the shape).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// The data, borrowed.
    pub fn data(&self) -> Data<'_> {
        match &self.storage {
            Storage::F32(v) => Data::F32(v),
            Storage::Bf16(v) => Data::Bf16(v),
            Storage::Mapped { map, offset, len } => {
                let bytes = &map[*offset..*offset + *len];
                // SAFETY: alignment was checked when the tensor was mapped, the length is a
                // multiple of the element size, and every bit pattern is a valid f32/bf16.
                unsafe {
                    match self.dtype {
                        DType::F32 => Data::F32(std::slice::from_raw_parts(
                            bytes.as_ptr() as *const f32,
                            len / 4,
                        )),
                        DType::Bf16 => Data::Bf16(std::slice::from_raw_parts(
                            bytes.as_ptr() as *const bf16,
                            len / 2,
                        )),
                    }
                }
            }
        }
    }
    /// Tells the kernel that this tensor's mapped pages are no longer needed (after packing),
    /// so they leave the resident set. A no-op for owned tensors.
    pub fn release(&self) {
        if let Storage::Mapped { map, offset, len } = &self.storage {
            const PAGE: usize = 4096;
            let start = offset.div_ceil(PAGE) * PAGE;
            let end = (offset + len) / PAGE * PAGE;
            if end > start {
                // SAFETY: the mapping is private and read-only; dropped pages are re-read from
                // the file if anything touches them again.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        }
    }

    /// The data widened to f32 (a copy).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.data().to_f32_vec()
    }
}

/// Tensors by checkpoint name.
#[derive(Debug, Default, Clone)]
pub struct WeightStore {
    tensors: HashMap<String, Tensor>,
}

/// Name of the HF shard index.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// Name of the single-file checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";

impl WeightStore {
    /// An empty store, filled with [`WeightStore::insert`] (tests, synthetic models).
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a checkpoint directory: every shard named by `model.safetensors.index.json`, or
    /// `model.safetensors` when there is no index.
    pub fn open_dir(dir: &Path) -> Result<Self, WeightError> {
        let index = dir.join(INDEX_FILE);
        let shards: Vec<PathBuf> = if index.exists() {
            let text = std::fs::read_to_string(&index).map_err(|cause| WeightError::Io {
                path: index.clone(),
                cause,
            })?;
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| WeightError::Format {
                    path: index.clone(),
                    message: format!("{}:{}: {e}", e.line(), e.column()),
                })?;
            let map = v
                .get("weight_map")
                .and_then(|m| m.as_object())
                .ok_or_else(|| WeightError::Format {
                    path: index.clone(),
                    message: "no `weight_map` object".into(),
                })?;
            let mut files: Vec<String> = map
                .values()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            files.sort();
            files.dedup();
            files.into_iter().map(|f| dir.join(f)).collect()
        } else {
            vec![dir.join(SINGLE_FILE)]
        };
        let mut store = Self::new();
        for shard in shards {
            store.add_file(&shard)?;
        }
        Ok(store)
    }

    /// Maps one safetensors file and adds its tensors.
    pub fn add_file(&mut self, path: &Path) -> Result<(), WeightError> {
        let file = std::fs::File::open(path).map_err(|cause| WeightError::Io {
            path: path.to_owned(),
            cause,
        })?;
        // SAFETY: the checkpoint is treated as read-only for the life of the process.
        let map = unsafe { Mmap::map(&file) }.map_err(|cause| WeightError::Io {
            path: path.to_owned(),
            cause,
        })?;
        let map = Arc::new(map);
        let st = SafeTensors::deserialize(&map[..]).map_err(|e| WeightError::Format {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let base = map.as_ptr() as usize;
        for (name, view) in st.tensors() {
            let dtype = match view.dtype() {
                Dtype::F32 => DType::F32,
                Dtype::BF16 => DType::Bf16,
                other => {
                    return Err(WeightError::Dtype {
                        name,
                        dtype: format!("{other:?}"),
                    });
                }
            };
            let bytes = view.data();
            let offset = bytes.as_ptr() as usize - base;
            let align = match dtype {
                DType::F32 => 4,
                DType::Bf16 => 2,
            };
            let storage = if (bytes.as_ptr() as usize).is_multiple_of(align) {
                Storage::Mapped {
                    map: map.clone(),
                    offset,
                    len: bytes.len(),
                }
            } else {
                match dtype {
                    DType::F32 => Storage::F32(Arc::new(
                        bytes
                            .chunks_exact(4)
                            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect(),
                    )),
                    DType::Bf16 => Storage::Bf16(Arc::new(
                        bytes
                            .chunks_exact(2)
                            .map(|c| bf16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                            .collect(),
                    )),
                }
            };
            self.tensors.insert(
                name,
                Tensor {
                    shape: view.shape().to_vec(),
                    dtype,
                    storage,
                },
            );
        }
        Ok(())
    }

    /// Adds or replaces the tensor `name`.
    pub fn insert(&mut self, name: impl Into<String>, t: Tensor) {
        self.tensors.insert(name.into(), t);
    }

    /// Number of tensors held.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }
    /// Whether the store holds no tensors.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
    /// Names of the tensors held, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The tensor `name`, checked against `shape`.
    pub fn get_ref(&self, name: &str, shape: &[usize]) -> Result<&Tensor, WeightError> {
        let t = self.tensors.get(name).ok_or_else(|| WeightError::Missing {
            name: name.to_owned(),
            expected: shape.to_vec(),
        })?;
        if t.shape != shape {
            return Err(WeightError::Shape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                found: t.shape.clone(),
            });
        }
        Ok(t)
    }
}

/// Where the model builder takes its tensors from: a checkpoint ([`WeightStore`]) or a
/// generator ([`RandomWeights`]).
pub trait WeightSource: Sync {
    /// The tensor `name`, which must have `shape`.
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightError>;

    /// The tensor widened to f32 (small tensors: norms, biases, tables).
    fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, WeightError> {
        Ok(self.tensor(name, shape)?.to_f32_vec())
    }
}

impl WeightSource for WeightStore {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightError> {
        self.get_ref(name, shape).cloned()
    }
}

/// Seeded random weights of any requested name and shape (for instantiating the full-size
/// architecture without its checkpoint). Scales keep activations O(1): matrices uniform with
/// variance 1/fan_in (fan_in = dim 1), biases ±0.05, norm weights 1 ± 0.1.
#[derive(Debug, Clone)]
pub struct RandomWeights {
    /// Seed mixed with each tensor's name, so a tensor's values depend only on (seed, name, shape).
    pub seed: u64,
    /// Element type the generated tensors are stored in.
    pub dtype: DType,
}

impl WeightSource for RandomWeights {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightError> {
        use rayon::prelude::*;
        let n: usize = shape.iter().product();
        let mut h = self.seed ^ 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let is_bias = name.ends_with(".bias") || name.ends_with(".b");
        let (center, half) = if shape.len() == 1 && !is_bias {
            (1.0f32, 0.1f32)
        } else if is_bias || shape.len() == 1 {
            (0.0, 0.05)
        } else {
            (0.0, (3.0 / shape[1] as f32).sqrt())
        };
        const CHUNK: usize = 1 << 16;
        fn fill<T>(
            h: u64,
            c: usize,
            dst: &mut [T],
            center: f32,
            half: f32,
            conv: impl Fn(f32) -> T,
        ) {
            let mut s = splitmix(h ^ (c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            for o in dst.iter_mut() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let u = (s >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
                *o = conv(center + half * (2.0 * u - 1.0));
            }
        }
        Ok(match self.dtype {
            DType::Bf16 => {
                let mut v = vec![bf16::ZERO; n];
                v.par_chunks_mut(CHUNK)
                    .enumerate()
                    .for_each(|(c, dst)| fill(h, c, dst, center, half, bf16::from_f32));
                Tensor::from_bf16(shape.to_vec(), v)
            }
            DType::F32 => {
                let mut v = vec![0.0f32; n];
                v.par_chunks_mut(CHUNK)
                    .enumerate()
                    .for_each(|(c, dst)| fill(h, c, dst, center, half, |x| x));
                Tensor::from_f32(shape.to_vec(), v)
            }
        })
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}
