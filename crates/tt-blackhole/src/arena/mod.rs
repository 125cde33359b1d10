//! The DiT weight arena: every matmul weight of the DiT blocks, transposed to `[K, N]`
//! (input features × output features, the orientation a matmul streams), padded to whole
//! tiles, packed in one format and laid out in the order the compute cores' readers stream it.
//!
//! * [`layout`]: the index, computed from shapes alone (offset, shape, format per tensor).
//! * [`build`]: fills the bytes from a [`TensorSource`] (f32 or bf16 tensors).
//! * [`cache`]: the versioned, sealed, memory-mapped cache file (weights checked on first read).

pub mod build;
pub mod cache;
pub mod layout;

use std::borrow::Cow;
use std::path::PathBuf;

pub use build::{KnWeight, SourceLayout, build_arena_bytes, decode_weight};
pub use cache::{Arena, ArenaKey, CacheOutcome, open_or_build};
pub use layout::{ArenaEntry, ArenaIndex, LAYOUT_VERSION, arena_layout};

/// Element data of a source tensor.
#[derive(Debug, Clone)]
pub enum TensorData<'a> {
    /// f32 values, borrowed or owned.
    F32(Cow<'a, [f32]>),
    /// Little-endian f32 bytes (e.g. straight from a safetensors file; no alignment needed).
    F32Le(Cow<'a, [u8]>),
    /// Little-endian bf16 bytes. bf16 widens to f32 exactly before packing, so a bf16 source
    /// and its f32 equivalent give identical arena bytes.
    Bf16Le(Cow<'a, [u8]>),
}

impl TensorData<'_> {
    /// Number of elements (not bytes).
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F32Le(b) => b.len() / 4,
            TensorData::Bf16Le(b) => b.len() / 2,
        }
    }

    /// Whether the tensor holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A tensor as the checkpoint holds it: `[out, in]` for a `nn.Linear` weight.
#[derive(Debug, Clone)]
pub struct SourceTensor<'a> {
    /// Dimensions, outermost first (`[out, in]` for a linear weight).
    pub shape: Vec<usize>,
    /// Row-major element data; its length must be the product of `shape`.
    pub data: TensorData<'a>,
}

/// Why a [`TensorSource`] could not give a tensor: the source's own error (a checkpoint
/// reader's, an I/O error…), kept typed for the caller's chain.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// Where the arena builder gets tensors from, by checkpoint name. Implemented for closures
/// `Fn(&str) -> Result<SourceTensor, SourceError>`, so callers need no wrapper type.
pub trait TensorSource: Sync {
    /// The tensor stored under the checkpoint name `name`.
    fn tensor(&self, name: &str) -> Result<SourceTensor<'_>, SourceError>;
}

impl<F> TensorSource for F
where
    F: for<'n> Fn(&'n str) -> Result<SourceTensor<'static>, SourceError> + Sync,
{
    fn tensor(&self, name: &str) -> Result<SourceTensor<'_>, SourceError> {
        self(name)
    }
}

/// Arena build or cache failure.
#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    /// The source could not give the tensor (its cause is in the message, not also a
    /// `source()`, so a report that walks the chain prints it once).
    #[error("tensor {name}: {cause}")]
    Source {
        /// Checkpoint name asked for.
        name: String,
        /// The source's own error.
        cause: SourceError,
    },
    /// The tensor's stored tiles do not decode.
    #[error("tensor {name}: {cause}")]
    Decode {
        /// Checkpoint name of the weight.
        name: String,
        /// What the codec rejected.
        cause: crate::bfp::CodecError,
    },
    /// The source tensor's shape is not the one the DiT dimensions call for.
    #[error("tensor {name}: shape {got:?}, expected {expected:?}")]
    Shape {
        /// Checkpoint name of the tensor.
        name: String,
        /// `[out, in]` the layout expects.
        expected: Vec<usize>,
        /// Shape the source returned.
        got: Vec<usize>,
    },
    /// The I/O cause is part of the message and not also a `source()`, so a report that
    /// walks the chain prints it once.
    #[error("{path}: {cause}")]
    Io {
        /// File or directory the operation was on.
        path: PathBuf,
        /// The underlying I/O error.
        cause: std::io::Error,
    },
    /// A cache file that must not be used (the caller rebuilds it).
    #[error("{path}: corrupt arena cache: {reason}")]
    Corrupt {
        /// The rejected cache file.
        path: PathBuf,
        /// Which check failed.
        reason: String,
    },
    /// A weight's bytes do not match the digest in the sealed index (checked on first read,
    /// after the open): the file was changed after it was written. Delete it to rebuild.
    #[error(
        "{path}: corrupt arena cache: checksum mismatch in {name} (delete the file to rebuild it)"
    )]
    WeightChecksum {
        /// The cache file.
        path: PathBuf,
        /// Checkpoint name of the weight whose bytes changed.
        name: String,
    },
    /// [`Arena::decode`](cache::Arena::decode) was asked for a name the index does not hold.
    #[error("arena has no tensor {0}")]
    NoSuchTensor(String),
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ArenaError {
    let path = path.into();
    move |cause| ArenaError::Io { path, cause }
}
