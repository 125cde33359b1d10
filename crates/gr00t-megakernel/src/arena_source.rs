//! Feeding the arena builder from the model's weights.

use std::borrow::Cow;

use tt_blackhole::arena::{ArenaIndex, SourceError, SourceTensor, TensorData, TensorSource};
use tt_blackhole::dims::DitDims;

use gr00t_runtime::config::Gr00tConfig;
use gr00t_runtime::weights::{Data, WeightSource};

/// The DiT sizes of a GR00T config, with the context length the plan is cut for.
pub fn dit_dims(cfg: &Gr00tConfig, ctx_tokens: usize) -> DitDims {
    let dc = &cfg.diffusion_model_cfg;
    let d = dc.num_attention_heads * dc.attention_head_dim;
    DitDims {
        num_layers: dc.num_layers,
        num_heads: dc.num_attention_heads,
        head_dim: dc.attention_head_dim,
        cross_dim: cfg.backbone_embedding_dim,
        ff_inner: 4 * d,
        sa_tokens: cfg.action_horizon + 1,
        ctx_tokens,
    }
}

/// A [`TensorSource`] over a [`WeightSource`] (checkpoint or random weights): the shape each
/// name must have comes from the arena layout.
pub struct CheckpointTensors<'a> {
    /// The tensors by checkpoint name (bf16 or f32, as stored).
    pub weights: &'a dyn WeightSource,
    /// The arena layout: which names it holds and each one's torch shape.
    pub layout: &'a ArenaIndex,
}

impl TensorSource for CheckpointTensors<'_> {
    fn tensor(&self, name: &str) -> Result<SourceTensor<'_>, SourceError> {
        let e = self
            .layout
            .by_name(name)
            .ok_or_else(|| format!("{name} is not an arena weight"))?;
        let t = self.weights.tensor(name, &e.torch_shape)?;
        // The tensor may be a mapping that is released afterwards: take an owned copy (one
        // weight at a time, so at most one weight's worth of memory).
        let data = match t.data() {
            Data::F32(v) => TensorData::F32(Cow::Owned(v.to_vec())),
            Data::Bf16(v) => TensorData::Bf16Le(Cow::Owned(
                v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
            )),
        };
        t.release();
        Ok(SourceTensor {
            shape: e.torch_shape.to_vec(),
            data,
        })
    }
}
