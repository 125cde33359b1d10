//! The DiT shapes the arena and the plan are built from, and the checkpoint tensor names of
//! every block matmul weight (`action_head.model.transformer_blocks.{i}.…`).

use serde::{Deserialize, Serialize};

/// Sizes of the GR00T N1.6 action-head DiT (`AlternateVLDiT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DitDims {
    /// Transformer blocks (32 full size).
    pub num_layers: usize,
    /// Attention heads (32) …
    pub num_heads: usize,
    /// … of this width (48); `num_heads * head_dim` is the DiT width D (1536).
    pub head_dim: usize,
    /// Width of the vision-language context the cross blocks attend to (2048).
    pub cross_dim: usize,
    /// Feed-forward inner width (4·D = 6144, diffusers `FeedForward` mult 4).
    pub ff_inner: usize,
    /// Tokens the DiT runs on: 1 state token + action_horizon (51).
    pub sa_tokens: usize,
    /// Context tokens of the cross blocks (the prompt length S; 116 for the GR1 example). Only
    /// the plan and roofline use it; the arena does not depend on it.
    pub ctx_tokens: usize,
}

/// Why a config could not be read.
#[derive(Debug, thiserror::Error)]
#[error("DiT config: {0}")]
pub struct DimsError(pub String);

impl DitDims {
    /// The full-size GR00T N1.6 DiT (`full_config.json`) with the GR1 prompt of 116 tokens.
    pub const FULL: DitDims = DitDims {
        num_layers: 32,
        num_heads: 32,
        head_dim: 48,
        cross_dim: 2048,
        ff_inner: 6144,
        sa_tokens: 51,
        ctx_tokens: 116,
    };

    /// DiT width D.
    pub const fn width(&self) -> usize {
        self.num_heads * self.head_dim
    }

    /// Blocks with even index cross-attend to the VL context; odd ones self-attend.
    pub const fn is_cross(block: usize) -> bool {
        block.is_multiple_of(2)
    }

    /// Read the sizes from a GR00T `config.json` value (`diffusion_model_cfg`,
    /// `backbone_embedding_dim`, `action_horizon`), with the context length given separately.
    pub fn from_config(cfg: &serde_json::Value, ctx_tokens: usize) -> Result<Self, DimsError> {
        let get = |v: &serde_json::Value, k: &str| -> Result<usize, DimsError> {
            v.get(k)
                .and_then(serde_json::Value::as_u64)
                .map(|x| x as usize)
                .ok_or_else(|| DimsError(format!("missing or non-integer key `{k}`")))
        };
        let dit = cfg
            .get("diffusion_model_cfg")
            .ok_or_else(|| DimsError("missing `diffusion_model_cfg`".into()))?;
        let num_heads = get(dit, "num_attention_heads")?;
        let head_dim = get(dit, "attention_head_dim")?;
        Ok(DitDims {
            num_layers: get(dit, "num_layers")?,
            num_heads,
            head_dim,
            cross_dim: get(cfg, "backbone_embedding_dim")?,
            ff_inner: 4 * num_heads * head_dim,
            sa_tokens: get(cfg, "action_horizon")? + 1,
            ctx_tokens,
        })
    }

    /// Every block matmul weight in stream order (see [`WeightKind::STREAM_ORDER`]).
    pub fn weights(&self) -> Vec<WeightRef> {
        let mut v = Vec::with_capacity(self.num_layers * WeightKind::STREAM_ORDER.len());
        for block in 0..self.num_layers {
            for kind in WeightKind::STREAM_ORDER {
                v.push(WeightRef {
                    block,
                    kind,
                    shape: self.torch_shape(block, kind),
                });
            }
        }
        v
    }

    /// `[out, in]` as stored in the checkpoint (torch `nn.Linear` order).
    pub fn torch_shape(&self, block: usize, kind: WeightKind) -> [usize; 2] {
        let d = self.width();
        let kv_in = if Self::is_cross(block) {
            self.cross_dim
        } else {
            d
        };
        match kind {
            WeightKind::AdaNorm => [2 * d, d],
            WeightKind::Q | WeightKind::Out => [d, d],
            WeightKind::K | WeightKind::V => [d, kv_in],
            WeightKind::FfUp => [self.ff_inner, d],
            WeightKind::FfDown => [d, self.ff_inner],
        }
    }
}

/// The seven matmul weights of one DiT block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightKind {
    /// `norm1.linear`: AdaLN (scale, shift) from SiLU(temb).
    AdaNorm,
    /// `attn1.to_q`: query projection.
    Q,
    /// `attn1.to_k`: key projection (input is the VL context in cross blocks).
    K,
    /// `attn1.to_v`: value projection (input is the VL context in cross blocks).
    V,
    /// `attn1.to_out.0`.
    Out,
    /// `ff.net.0.proj` (GELU-tanh follows).
    FfUp,
    /// `ff.net.2`.
    FfDown,
}

impl WeightKind {
    /// The order the compute cores consume a block's weights, which is the order the readers
    /// stream them: AdaLN modulation first (it only needs temb), then Q, K, V, the output
    /// projection, and the two feed-forward matrices.
    pub const STREAM_ORDER: [WeightKind; 7] = [
        WeightKind::AdaNorm,
        WeightKind::Q,
        WeightKind::K,
        WeightKind::V,
        WeightKind::Out,
        WeightKind::FfUp,
        WeightKind::FfDown,
    ];

    /// Module path inside a block.
    pub const fn module(self) -> &'static str {
        match self {
            WeightKind::AdaNorm => "norm1.linear",
            WeightKind::Q => "attn1.to_q",
            WeightKind::K => "attn1.to_k",
            WeightKind::V => "attn1.to_v",
            WeightKind::Out => "attn1.to_out.0",
            WeightKind::FfUp => "ff.net.0.proj",
            WeightKind::FfDown => "ff.net.2",
        }
    }

    /// Position in [`Self::STREAM_ORDER`].
    pub fn stream_index(self) -> usize {
        Self::STREAM_ORDER
            .iter()
            .position(|k| *k == self)
            .unwrap_or(0)
    }
}

/// One matmul weight of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightRef {
    /// Block index (0-based; even blocks are cross blocks).
    pub block: usize,
    /// Which of the block's seven weights.
    pub kind: WeightKind,
    /// `[out, in]` as in the checkpoint.
    pub shape: [usize; 2],
}

impl WeightRef {
    /// The checkpoint tensor name, e.g. `action_head.model.transformer_blocks.3.attn1.to_q.weight`.
    pub fn name(&self) -> String {
        checkpoint_name(self.block, self.kind)
    }
}

/// Checkpoint tensor name of a block weight.
pub fn checkpoint_name(block: usize, kind: WeightKind) -> String {
    format!(
        "action_head.model.transformer_blocks.{block}.{}.weight",
        kind.module()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_size_parameter_count() {
        let d = DitDims::FULL;
        let params: usize = d.weights().iter().map(|w| w.shape[0] * w.shape[1]).sum();
        // 16 cross blocks x 34,603,008 + 16 self blocks x 33,030,144 (biases excluded).
        assert_eq!(params, 16 * 34_603_008 + 16 * 33_030_144);
        assert_eq!(d.torch_shape(0, WeightKind::K), [1536, 2048]);
        assert_eq!(d.torch_shape(1, WeightKind::K), [1536, 1536]);
        assert_eq!(
            checkpoint_name(7, WeightKind::Out),
            "action_head.model.transformer_blocks.7.attn1.to_out.0.weight"
        );
    }

    #[test]
    fn from_full_config_json() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/golden/gr00t-n16-tiny/case1/full_config.json"
        );
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(DitDims::from_config(&cfg, 116).unwrap(), DitDims::FULL);
        let err = DitDims::from_config(&serde_json::json!({}), 1).unwrap_err();
        assert!(err.to_string().contains("diffusion_model_cfg"));
    }
}
