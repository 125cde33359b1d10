//! The Eagle backbone's shapes as the device would run them: the SigLIP2 vision tower, the
//! projector (`mlp1`: 2×2 pixel-unshuffle, LayerNorm, Linear, GELU, Linear) and Qwen3 up to
//! `select_layer`. Each stage lists its matmuls and attentions ([`StageWork`]), which the
//! per-stage roofline ([`crate::plan::stages`]) turns into bytes, FLOPs and a bound.

use serde::{Deserialize, Serialize};

use crate::format::ArenaDtype;

/// The format of every backbone weight in the arena: bf16, chosen by measured accuracy
/// (`gr00t-runtime/tests/backbone_formats.rs`). The checkpoint holds bf16, so bf16 storage is
/// exact; bfp8_b costs about 1e-4 of PCC per stage on the tiny golden and per full-width layer
/// (0.99925 on the backbone features with all three stages in it), bfp4_b 2e-2 to 7e-2 per
/// stage (0.84 with all three). The seed keeps its backbone in bf16 too. Qwen3 is DRAM-bound
/// (its roofline): bfp8_b would halve its bound, worth measuring at full depth on the real
/// checkpoint first.
pub const BACKBONE_DTYPE: ArenaDtype = ArenaDtype::Bf16;

/// One matmul `[m, k] · [k, n]` whose `[k, n]` operand is a weight streamed from DRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gemm {
    /// Activation rows (tokens).
    pub m: usize,
    /// Inner width.
    pub k: usize,
    /// Output width.
    pub n: usize,
}

/// Attention over `heads` heads of `head_dim`: `q_tokens` queries against `kv_tokens` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    /// Query heads.
    pub heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Query rows.
    pub q_tokens: usize,
    /// Key/value rows.
    pub kv_tokens: usize,
    /// Causal: query `i` sees keys `0..=i` only, so a kernel skips the tiles above the diagonal.
    pub causal: bool,
}

/// What one model stage computes and streams per forward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageWork {
    /// The stage's name (`vision`, `adapter`, `llm`).
    pub name: String,
    /// Format of the stage's weights in DRAM.
    pub dtype: ArenaDtype,
    /// Every weight matmul, once each (a weight is streamed once per forward).
    pub gemms: Vec<Gemm>,
    /// Every attention (no weights: activations only).
    pub attentions: Vec<Attention>,
    /// Bytes read from DRAM besides the weights (the token-embedding rows gathered), bf16.
    pub extra_dram_bytes: u64,
}

/// The SigLIP2 vision tower on the images of one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisionDims {
    /// Encoder layers (27 full size).
    pub layers: usize,
    /// Width (1152).
    pub hidden: usize,
    /// MLP inner width (4304).
    pub mlp: usize,
    /// Attention heads (16).
    pub heads: usize,
    /// Pixels of one patch times channels (3 · 14 · 14 = 588): the patch embedding's input.
    pub patch_in: usize,
    /// Patches of one image (324 for a 252×252 view).
    pub patches: usize,
    /// Images per observation; each attends over its own patches.
    pub images: usize,
}

/// The projector (`mlp1`) from pixel-unshuffled vision features to the LLM's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectorDims {
    /// Input width: 4 × the vision width (2×2 patches per image token).
    pub input: usize,
    /// Output width: the LLM's hidden size.
    pub output: usize,
    /// Image tokens of the observation (a quarter of its patches).
    pub tokens: usize,
}

/// Qwen3 up to `select_layer`, then the final RMSNorm and vlln.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmDims {
    /// Decoder layers kept (`select_layer`, 16 for N1.6).
    pub layers: usize,
    /// Width (2048).
    pub hidden: usize,
    /// SwiGLU inner width (6144).
    pub intermediate: usize,
    /// Query heads (16) …
    pub heads: usize,
    /// … sharing this many key/value heads (8).
    pub kv_heads: usize,
    /// Width of one head (128).
    pub head_dim: usize,
    /// Prompt tokens S (image tokens included).
    pub tokens: usize,
}

/// The three backbone stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackboneDims {
    /// The vision tower.
    pub vision: VisionDims,
    /// The projector.
    pub projector: ProjectorDims,
    /// The language model.
    pub llm: LlmDims,
}

impl VisionDims {
    /// The rows the device runs per image: the patches in four groups (one per position in
    /// the projector's 2×2 block), each padded to whole tiles, so that the projector's
    /// pixel-unshuffle copies whole tile rows (gr00t-megakernel's `vision_layout`): 384 for
    /// 324 patches, where raster order would pad to 352.
    pub fn device_rows(&self) -> usize {
        4 * (self.patches / 4).div_ceil(32) * 32
    }

    /// Patch embedding, then per layer Q, K, V, O and the two MLP matmuls; full attention per
    /// image; over the rows the device runs ([`VisionDims::device_rows`]).
    pub fn work(&self, dtype: ArenaDtype) -> StageWork {
        let (m, h) = (self.device_rows() * self.images, self.hidden);
        let mut gemms = vec![Gemm {
            m,
            k: self.patch_in,
            n: h,
        }];
        for _ in 0..self.layers {
            gemms.extend([Gemm { m, k: h, n: h }; 4]);
            gemms.push(Gemm {
                m,
                k: h,
                n: self.mlp,
            });
            gemms.push(Gemm {
                m,
                k: self.mlp,
                n: h,
            });
        }
        let attention = Attention {
            heads: self.heads * self.images,
            head_dim: h / self.heads,
            q_tokens: self.device_rows(),
            kv_tokens: self.device_rows(),
            causal: false,
        };
        StageWork {
            name: "vision".into(),
            dtype,
            gemms,
            attentions: vec![attention; self.layers],
            extra_dram_bytes: 0,
        }
    }
}

impl ProjectorDims {
    /// The two Linears (the LayerNorm and GELU have no matmul).
    pub fn work(&self, dtype: ArenaDtype) -> StageWork {
        let m = self.tokens;
        StageWork {
            name: "adapter".into(),
            dtype,
            gemms: vec![
                Gemm {
                    m,
                    k: self.input,
                    n: self.output,
                },
                Gemm {
                    m,
                    k: self.output,
                    n: self.output,
                },
            ],
            attentions: Vec::new(),
            extra_dram_bytes: 0,
        }
    }
}

impl LlmDims {
    /// Per layer Q, K, V, O, gate, up and down; causal GQA attention; the prompt's
    /// token-embedding rows gathered from DRAM (bf16).
    pub fn work(&self, dtype: ArenaDtype) -> StageWork {
        let (m, h) = (self.tokens, self.hidden);
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let mut gemms = Vec::with_capacity(7 * self.layers);
        for _ in 0..self.layers {
            gemms.push(Gemm { m, k: h, n: q });
            gemms.extend([Gemm { m, k: h, n: kv }; 2]);
            gemms.push(Gemm { m, k: q, n: h });
            gemms.extend(
                [Gemm {
                    m,
                    k: h,
                    n: self.intermediate,
                }; 2],
            );
            gemms.push(Gemm {
                m,
                k: self.intermediate,
                n: h,
            });
        }
        let attention = Attention {
            heads: self.heads,
            head_dim: self.head_dim,
            q_tokens: m,
            kv_tokens: m,
            causal: true,
        };
        StageWork {
            name: "llm".into(),
            dtype,
            gemms,
            attentions: vec![attention; self.layers],
            extra_dram_bytes: 2 * (m * h) as u64,
        }
    }
}

impl BackboneDims {
    /// The full-size N1.6-3B backbone (SigLIP2-so400m, Qwen3-1.7B to layer 16) on one
    /// 252-pixel view and the GR1 prompt of 116 tokens, as `ModelConfig::backbone_dims` gives
    /// it for the bundled config.
    pub const FULL: BackboneDims = BackboneDims {
        vision: VisionDims {
            layers: 27,
            hidden: 1152,
            mlp: 4304,
            heads: 16,
            patch_in: 588,
            patches: 324,
            images: 1,
        },
        projector: ProjectorDims {
            input: 4608,
            output: 2048,
            tokens: 81,
        },
        llm: LlmDims {
            layers: 16,
            hidden: 2048,
            intermediate: 6144,
            heads: 16,
            kv_heads: 8,
            head_dim: 128,
            tokens: 116,
        },
    };

    /// The stages in the order a forward runs them: vision, adapter, llm.
    pub fn work(&self, dtype: ArenaDtype) -> Vec<StageWork> {
        vec![
            self.vision.work(dtype),
            self.projector.work(dtype),
            self.llm.work(dtype),
        ]
    }

    /// Parameters of every backbone matmul weight (what the arena would have to hold).
    pub fn weight_params(&self) -> u64 {
        self.work(ArenaDtype::Bf16)
            .iter()
            .flat_map(|s| &s.gemms)
            .map(|g| (g.k * g.n) as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_size_weight_counts_match_the_published_models() {
        let d = BackboneDims::FULL;
        let vision: u64 = d
            .vision
            .work(ArenaDtype::Bf16)
            .gemms
            .iter()
            .map(|g| (g.k * g.n) as u64)
            .sum();
        // SigLIP2-so400m's encoder: 27 × (4·1152² + 2·1152·4304) plus the 588×1152 patch embedding.
        assert_eq!(
            vision,
            27 * (4 * 1152 * 1152 + 2 * 1152 * 4304) + 588 * 1152
        );
        let llm: u64 = d
            .llm
            .work(ArenaDtype::Bf16)
            .gemms
            .iter()
            .map(|g| (g.k * g.n) as u64)
            .sum();
        // Qwen3-1.7B's layers: q 2048², k/v 2048·1024, o 2048², SwiGLU 3·2048·6144.
        assert_eq!(
            llm,
            16 * (2 * 2048 * 2048 + 2 * 2048 * 1024 + 3 * 2048 * 6144)
        );
        assert_eq!(d.weight_params(), vision + llm + 4608 * 2048 + 2048 * 2048);
        assert_eq!(
            d.llm.work(ArenaDtype::Bf16).extra_dram_bytes,
            2 * 116 * 2048
        );
    }

    #[test]
    fn attentions_follow_the_heads_and_masks() {
        let d = BackboneDims::FULL;
        let v = d.vision.work(ArenaDtype::Bf16);
        assert_eq!(v.attentions.len(), 27);
        assert_eq!(
            (v.attentions[0].head_dim, v.attentions[0].causal),
            (72, false)
        );
        let l = d.llm.work(ArenaDtype::Bf16);
        assert_eq!((l.attentions[0].heads, l.attentions[0].causal), (16, true));
        assert!(d.projector.work(ArenaDtype::Bf16).attentions.is_empty());
    }
}
