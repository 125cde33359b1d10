//! The Eagle backbone's matrices on the device (issue 40): SigLIP2 encoder layers and the
//! projector, packed for our matmul kernels in the backbone's format
//! (`tt_blackhole::backbone::BACKBONE_DTYPE`, bf16: the checkpoint's own values, exact), and
//! the LayerNorms' γ/β the device's norm rows read beside them.

use std::ops::Range;

use tt_blackhole::arena::ArenaError;
use tt_blackhole::format::ArenaDtype;

use gr00t_runtime::config::EagleConfig;
use gr00t_runtime::model::ModelError;
use gr00t_runtime::weights::{WeightError, WeightSource};

pub use crate::llm_arena::{EmbedTable, LlmMatrix};
use crate::packed::{PackedWeights, linear};
use crate::vision_layout::projector_feature;

/// The checkpoint's prefix of the SigLIP2 tower.
const VISION: &str = "backbone.model.vision_model.vision_model";
/// The checkpoint's prefix of the Eagle projector (`mlp1`: LayerNorm, Linear, GELU, Linear).
const PROJECTOR: &str = "backbone.model.mlp1";

/// One matrix of a SigLIP2 encoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VisionMatrix {
    /// `self_attn.q_proj`: `[C, C]`.
    Q,
    /// `self_attn.k_proj`: `[C, C]`.
    K,
    /// `self_attn.v_proj`: `[C, C]`.
    V,
    /// `self_attn.out_proj`: `[C, C]` (the residual add follows).
    O,
    /// `mlp.fc1` (GELU-tanh follows): `[C, intermediate]`.
    Fc1,
    /// `mlp.fc2` (the residual add follows): `[intermediate, C]`.
    Fc2,
}

impl VisionMatrix {
    /// Every matrix of a layer, in arena order.
    pub const ALL: [VisionMatrix; 6] = [
        VisionMatrix::Q,
        VisionMatrix::K,
        VisionMatrix::V,
        VisionMatrix::O,
        VisionMatrix::Fc1,
        VisionMatrix::Fc2,
    ];

    /// The checkpoint's module name inside a layer.
    fn module(self) -> &'static str {
        match self {
            VisionMatrix::Q => "self_attn.q_proj",
            VisionMatrix::K => "self_attn.k_proj",
            VisionMatrix::V => "self_attn.v_proj",
            VisionMatrix::O => "self_attn.out_proj",
            VisionMatrix::Fc1 => "mlp.fc1",
            VisionMatrix::Fc2 => "mlp.fc2",
        }
    }
}

/// One matrix of the backbone on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackboneWeight {
    /// SigLIP2's patch embedding (a Linear over the unfolded 14×14×3 patches): `[588, C]`.
    PatchEmbed,
    /// SigLIP2 encoder layer `.0`'s `.1`.
    Vision(usize, VisionMatrix),
    /// The projector's first Linear (exact GELU follows): `[4C, text hidden]`, its rows in the
    /// device's feature order (`crate::vision_layout::projector_feature`).
    ProjectorFc1,
    /// The projector's second Linear: `[text hidden, text hidden]`.
    ProjectorFc2,
    /// Qwen3 layer `.0`'s `.1`.
    Llm(usize, LlmMatrix),
}

/// One LayerNorm of the backbone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackboneNorm {
    /// SigLIP2 encoder layer `.0`'s `layer_norm1` (before attention).
    VisionLn1(usize),
    /// Its `layer_norm2` (before the MLP).
    VisionLn2(usize),
    /// The tower's `post_layernorm`.
    VisionPost,
    /// The projector's LayerNorm over the pixel-unshuffled `4C` features (γ/β in the device's
    /// feature order).
    Projector,
    /// Qwen3 layer `.0`'s `input_layernorm` (RMS: γ alone, β zero).
    LlmIn(usize),
    /// Its `post_attention_layernorm` (RMS).
    LlmPost(usize),
    /// Its `self_attn.q_norm`, over one head (RMS, γ shared by the heads).
    LlmQ(usize),
    /// Its `self_attn.k_norm` (likewise).
    LlmK(usize),
    /// The body's final `norm` after the last kept layer (RMS).
    LlmFinal,
    /// The action head's `vlln` LayerNorm of the backbone's features (the head's weight, run
    /// where the features are made).
    Vlln,
}

/// A LayerNorm's affine: `γ·x̂ + β`.
#[derive(Debug, Clone, PartialEq)]
pub struct NormAffine {
    /// γ `[n]`.
    pub gamma: Vec<f32>,
    /// β `[n]`.
    pub beta: Vec<f32>,
    /// Its epsilon (the tower's `layer_norm_eps`; the projector's torch default 1e-5).
    pub eps: f32,
}

/// Why the backbone arena could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BackboneArenaError {
    /// A checkpoint tensor is missing or has the wrong shape or dtype.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// A layer past the last (the tower's, or the LLM's `select_layer`).
    #[error("{stage} layers {asked:?} asked, it has {layers}")]
    NoLayer {
        /// `vision` or `llm`.
        stage: &'static str,
        /// The layers asked for.
        asked: Range<usize>,
        /// The config's `num_hidden_layers`.
        layers: usize,
    },
    /// A weight could not be packed or decoded.
    #[error(transparent)]
    Arena(#[from] ArenaError),
    /// Attention heads of a width the device has no layout for (`crate::head_layout`).
    #[error(
        "heads of {0} columns: the device lays heads out in whole 32-column tiles (a head of at most 32, or a multiple of 32)"
    )]
    HeadWidth(usize),
    /// A weight asked for was not added to the arena.
    #[error("the backbone arena has no {0:?}")]
    Missing(BackboneWeight),
}

/// The model's error for a backbone that could not be packed: [`ModelError::BackboneArena`]
/// keeps this error as its source.
impl From<BackboneArenaError> for ModelError {
    fn from(e: BackboneArenaError) -> Self {
        ModelError::BackboneArena(Box::new(e))
    }
}

/// The backbone's packed matrices and its norms' affines.
#[derive(Debug, Clone)]
pub struct BackboneArena {
    /// Every matrix, in the order it was added.
    pub weights: PackedWeights<BackboneWeight>,
    /// Every norm's γ/β.
    pub norms: Vec<(BackboneNorm, NormAffine)>,
    /// SigLIP2's learned position table `[num_patches, C]` (a square grid), resized to each
    /// image's patch grid on the host, once per resolution.
    pub pos_table: Option<Vec<f32>>,
    /// Qwen3's token-embedding table, which the device gathers the prompt's rows from.
    pub embed: Option<EmbedTable>,
}

impl BackboneArena {
    /// An empty arena whose matrices will be `dtype` tiles.
    pub fn new(dtype: ArenaDtype) -> Self {
        BackboneArena {
            weights: PackedWeights::new(dtype),
            norms: Vec::new(),
            pos_table: None,
            embed: None,
        }
    }

    /// Adds SigLIP2's embeddings: the patch embedding and the position table.
    pub fn with_vision_embedding(
        mut self,
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
    ) -> Result<Self, BackboneArenaError> {
        let v = &cfg.vision_config;
        let (c, p) = (v.hidden_size, v.patch_size);
        let name = format!("{VISION}.embeddings.patch_embedding");
        let kn = linear(ws, &name, v.num_channels * p * p, c)?;
        self.weights.push(BackboneWeight::PatchEmbed, &name, kn)?;
        self.pos_table = Some(ws.f32(
            &format!("{VISION}.embeddings.position_embedding.weight"),
            &[v.num_patches, c],
        )?);
        Ok(self)
    }

    /// Adds SigLIP2 encoder layers `layers` (their six matrices and two norms each).
    pub fn with_vision_layers(
        mut self,
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
        layers: Range<usize>,
    ) -> Result<Self, BackboneArenaError> {
        let v = &cfg.vision_config;
        if layers.end > v.num_hidden_layers {
            return Err(BackboneArenaError::NoLayer {
                stage: "vision",
                asked: layers,
                layers: v.num_hidden_layers,
            });
        }
        let (c, inter) = (v.hidden_size, v.intermediate_size);
        let eps = v.layer_norm_eps as f32;
        for i in layers {
            let l = format!("{VISION}.encoder.layers.{i}");
            for m in VisionMatrix::ALL {
                let (k, n) = match m {
                    VisionMatrix::Fc1 => (c, inter),
                    VisionMatrix::Fc2 => (inter, c),
                    _ => (c, c),
                };
                let name = format!("{l}.{}", m.module());
                let kn = linear(ws, &name, k, n)?;
                self.weights.push(BackboneWeight::Vision(i, m), &name, kn)?;
            }
            for (norm, module) in [
                (BackboneNorm::VisionLn1(i), "layer_norm1"),
                (BackboneNorm::VisionLn2(i), "layer_norm2"),
            ] {
                let affine = norm_affine(ws, &format!("{l}.{module}"), c, eps)?;
                self.norms.push((norm, affine));
            }
        }
        Ok(self)
    }

    /// Adds the tower's post-LayerNorm and the projector: its LayerNorm over `4C` and its two
    /// Linears, the `4C` input features in the device's order.
    pub fn with_projector(
        mut self,
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
    ) -> Result<Self, BackboneArenaError> {
        let c = cfg.vision_config.hidden_size;
        let eps = cfg.vision_config.layer_norm_eps as f32;
        let post = norm_affine(ws, &format!("{VISION}.post_layernorm"), c, eps)?;
        self.norms.push((BackboneNorm::VisionPost, post));
        let in_dim = 4 * c;
        let d = cfg.text_config.hidden_size;
        let torch = norm_affine(ws, &format!("{PROJECTOR}.0"), in_dim, 1e-5)?;
        let permuted =
            |v: &[f32]| -> Vec<f32> { (0..in_dim).map(|g| v[projector_feature(g, c)]).collect() };
        let affine = NormAffine {
            gamma: permuted(&torch.gamma),
            beta: permuted(&torch.beta),
            eps: torch.eps,
        };
        self.norms.push((BackboneNorm::Projector, affine));
        let name = format!("{PROJECTOR}.1");
        let mut fc1 = linear(ws, &name, in_dim, d)?;
        let rows = fc1.kn.clone();
        for (g, row) in fc1.kn.chunks_exact_mut(d).enumerate() {
            let f = projector_feature(g, c);
            row.copy_from_slice(&rows[f * d..(f + 1) * d]);
        }
        self.weights
            .push(BackboneWeight::ProjectorFc1, &name, fc1)?;
        let name = format!("{PROJECTOR}.3");
        self.weights.push(
            BackboneWeight::ProjectorFc2,
            &name,
            linear(ws, &name, d, d)?,
        )?;
        Ok(self)
    }

    /// SigLIP2's whole tower and the projector, as the device runs them per image.
    pub fn vision_stage(
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
        dtype: ArenaDtype,
    ) -> Result<Self, BackboneArenaError> {
        let layers = cfg.vision_config.num_hidden_layers;
        BackboneArena::new(dtype)
            .with_vision_embedding(ws, cfg)?
            .with_vision_layers(ws, cfg, 0..layers)?
            .with_projector(ws, cfg)
    }

    /// The encoder layers added, in order (`0..n`: [`BackboneArena::vision_stage`]'s).
    pub fn vision_layers(&self) -> usize {
        self.weights
            .entries
            .iter()
            .filter(|e| matches!(e.weight, BackboneWeight::Vision(_, VisionMatrix::Q)))
            .count()
    }

    /// The γ/β of `norm`, if it was added.
    pub fn norm(&self, norm: BackboneNorm) -> Option<&NormAffine> {
        self.norms.iter().find(|(n, _)| *n == norm).map(|(_, a)| a)
    }

    /// The decoded `[K, N]` values of `w` (what the device multiplies with) and its bias.
    pub fn matrix(&self, w: BackboneWeight) -> Result<(Vec<f32>, &[f32]), BackboneArenaError> {
        let e = self.weights.get(w).ok_or(BackboneArenaError::Missing(w))?;
        Ok((self.weights.decode(e)?, e.bias.as_slice()))
    }
}

/// `{prefix}.weight` and `{prefix}.bias`, both `[n]`.
pub(crate) fn norm_affine(
    ws: &dyn WeightSource,
    prefix: &str,
    n: usize,
    eps: f32,
) -> Result<NormAffine, WeightError> {
    Ok(NormAffine {
        gamma: ws.f32(&format!("{prefix}.weight"), &[n])?,
        beta: ws.f32(&format!("{prefix}.bias"), &[n])?,
        eps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden_case::case_dir;
    use gr00t_runtime::config::ModelConfig;
    use gr00t_runtime::weights::WeightStore;

    fn tiny() -> (WeightStore, EagleConfig) {
        let cfg = ModelConfig::from_dir(&case_dir()).expect("tiny config");
        let ws = WeightStore::open_dir(&case_dir()).expect("tiny weights");
        (ws, cfg.eagle)
    }

    #[test]
    fn packed_backbone_decodes_to_the_checkpoint_exactly_in_bf16() {
        let (ws, cfg) = tiny();
        let layers = cfg.vision_config.num_hidden_layers;
        let a = BackboneArena::vision_stage(&ws, &cfg, ArenaDtype::Bf16).unwrap();
        assert_eq!(a.weights.entries.len(), 1 + 6 * layers + 2);
        assert_eq!(a.norms.len(), 2 * layers + 2);
        assert_eq!(a.weights.bytes.len(), a.weights.total_tiles() * 2048);
        let (c, inter) = (
            cfg.vision_config.hidden_size,
            cfg.vision_config.intermediate_size,
        );
        let layer = layers - 1;
        let prefix = format!("{VISION}.encoder.layers.{layer}.mlp.fc1");
        // torch's [out, in], transposed here independently of `linear`.
        let w = ws.f32(&format!("{prefix}.weight"), &[inter, c]).unwrap();
        let b = ws.f32(&format!("{prefix}.bias"), &[inter]).unwrap();
        let (kn, bias) = a
            .matrix(BackboneWeight::Vision(layer, VisionMatrix::Fc1))
            .unwrap();
        for k in 0..c {
            for n in 0..inter {
                // The checkpoint holds bf16 values: bf16 tiles keep them bit for bit.
                assert_eq!(kn[k * inter + n].to_bits(), w[n * c + k].to_bits());
            }
        }
        assert_eq!(bias, b.as_slice());
        let ln = a.norm(BackboneNorm::VisionLn2(layer)).unwrap();
        let g = ws
            .f32(
                &format!("{VISION}.encoder.layers.{layer}.layer_norm2.weight"),
                &[c],
            )
            .unwrap();
        assert_eq!(ln.gamma, g);
        assert_eq!(ln.eps, cfg.vision_config.layer_norm_eps as f32);
        // The projector's input features in the device's order: block q's channel k is
        // torch's feature 4k + q (written out here, not through `projector_feature`).
        let d = cfg.text_config.hidden_size;
        let w1 = ws.f32("backbone.model.mlp1.1.weight", &[d, 4 * c]).unwrap();
        let g1 = ws.f32("backbone.model.mlp1.0.weight", &[4 * c]).unwrap();
        let (fc1, _) = a.matrix(BackboneWeight::ProjectorFc1).unwrap();
        let ln = a.norm(BackboneNorm::Projector).unwrap();
        for q in 0..4 {
            for k in 0..c {
                let (dev, torch) = (q * c + k, 4 * k + q);
                assert_eq!(ln.gamma[dev], g1[torch]);
                for n in 0..d {
                    assert_eq!(fc1[dev * d + n], w1[n * 4 * c + torch]);
                }
            }
        }
        assert_eq!(ln.eps, 1e-5);
        let fc2 = a.weights.get(BackboneWeight::ProjectorFc2).unwrap();
        assert_eq!(fc2.kn_shape, [d, d]);
        assert_eq!(
            a.weights
                .get(BackboneWeight::ProjectorFc1)
                .unwrap()
                .kn_shape,
            [4 * c, d]
        );
    }

    #[test]
    fn a_layer_past_the_tower_is_a_typed_error() {
        let (ws, cfg) = tiny();
        let n = cfg.vision_config.num_hidden_layers;
        let err = BackboneArena::new(ArenaDtype::Bf16)
            .with_vision_layers(&ws, &cfg, 0..n + 1)
            .unwrap_err();
        assert!(
            matches!(err, BackboneArenaError::NoLayer { layers, .. } if layers == n),
            "{err}"
        );
        assert!(err.to_string().contains(&format!("it has {n}")), "{err}");
    }
}
