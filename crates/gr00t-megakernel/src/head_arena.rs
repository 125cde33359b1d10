//! The action head's matrices on the device (issue 39, item 2): the state encoder, the action
//! encoder, the DiT's output layer and the action decoder of ONE embodiment, packed in the DiT
//! arena's block-float format and tile order (each weight's tiles in `tt_blackhole::split`
//! stream order for the plan's compute cores), so the device's matmul kernels read them as
//! they read a DiT weight; and the CPU emulation of every head stage from those same packed
//! values (the reference the device's head programs are tested against).
//!
//! The CPU emulation of the head's stages is in [`super::head_emulator`].

use tt_blackhole::arena::ArenaError;
use tt_blackhole::format::ArenaDtype;
use tt_blackhole::split::MatmulSplit;

use crate::packed::{KnMatrix, PackedEntry, PackedWeights, linear};

use gr00t_runtime::config::Gr00tConfig;
use gr00t_runtime::model::ModelError;
use gr00t_runtime::weights::{WeightError, WeightSource};

/// One matrix of the head on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeadWeight {
    /// `action_head.state_encoder.layer1` (ReLU follows): `[max_state_dim, hidden_size]`.
    StateL1,
    /// `action_head.state_encoder.layer2`: `[hidden_size, D]`.
    StateL2,
    /// `action_head.action_encoder.W1`: `[max_action_dim, D]`.
    ActW1,
    /// `action_head.action_encoder.W2`, rows `0..D` (the half that multiplies W1's output):
    /// `[D, D]`; its bias is the time half's product ([`HeadWeight::ActW2Time`]), so its own is 0.
    ActW2Act,
    /// `action_head.action_encoder.W2`, rows `D..2D` (the half that multiplies the sinusoidal
    /// timestep encoding), with W2's bias: `[D, D]`. Once per timestep.
    ActW2Time,
    /// `action_head.action_encoder.W3`: `[D, D]`.
    ActW3,
    /// `action_head.model.proj_out_1` with its two output halves swapped to `[scale | shift]`
    /// (the order the AdaLN LayerNorm reads): `[D, 2D]`. Once per timestep.
    ProjOut1,
    /// `action_head.model.proj_out_2`: `[D, output_dim]`.
    ProjOut2,
    /// `action_head.action_decoder.layer1` (ReLU follows): `[hidden_size, hidden_size]`.
    DecL1,
    /// `action_head.action_decoder.layer2` times the Euler step `dt` (weight and bias): the
    /// decoder's end adds `dt · v` to the chunk. Exact when `dt` is a power of two (4 steps).
    DecL2,
}

impl HeadWeight {
    /// A name for errors and reports (`head.StateL1`, ...).
    pub fn name(self) -> String {
        format!("head.{self:?}")
    }

    /// Every head weight, in arena order.
    pub const ALL: [HeadWeight; 10] = [
        HeadWeight::StateL1,
        HeadWeight::StateL2,
        HeadWeight::ActW1,
        HeadWeight::ActW2Act,
        HeadWeight::ActW2Time,
        HeadWeight::ActW3,
        HeadWeight::ProjOut1,
        HeadWeight::ProjOut2,
        HeadWeight::DecL1,
        HeadWeight::DecL2,
    ];
}

/// One weight's place in the head arena.
pub type HeadEntry = PackedEntry<HeadWeight>;

/// Why the head arena could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HeadArenaError {
    /// A checkpoint tensor is missing or has the wrong shape or dtype.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// The embodiment is not one of the checkpoint's projector slots.
    #[error("embodiment {embodiment} is not below max_num_embodiments {max}")]
    Embodiment {
        /// The projector index asked for.
        embodiment: usize,
        /// The checkpoint's slots.
        max: usize,
    },
    /// `num_inference_timesteps` is 0: there is no Euler step to fold into the decoder.
    #[error("num_inference_timesteps is 0: no Euler step size for the action decoder")]
    NoSteps,
    /// A weight could not be packed or decoded (a size that does not match its entry).
    #[error(transparent)]
    Arena(#[from] ArenaError),
}

/// The model's error for a head that could not be packed: [`ModelError::HeadArena`] keeps
/// this error as its source (the model crate knows no device backend).
impl From<HeadArenaError> for ModelError {
    fn from(e: HeadArenaError) -> Self {
        ModelError::HeadArena(Box::new(e))
    }
}

/// The head's weights of one embodiment, packed.
#[derive(Debug, Clone)]
pub struct HeadArena {
    /// The embodiment's projector index.
    pub embodiment: usize,
    /// The Euler step folded into [`HeadWeight::DecL2`].
    pub dt: f32,
    /// Every weight, in [`HeadWeight::ALL`] order, in the DiT arena's format.
    pub weights: PackedWeights<HeadWeight>,
}

impl HeadArena {
    /// Pack the head of `embodiment` from the checkpoint's tensors.
    pub fn build(
        ws: &dyn WeightSource,
        cfg: &Gr00tConfig,
        embodiment: usize,
        dtype: ArenaDtype,
    ) -> Result<Self, HeadArenaError> {
        let max = cfg.max_num_embodiments;
        if embodiment >= max {
            return Err(HeadArenaError::Embodiment { embodiment, max });
        }
        if cfg.num_inference_timesteps == 0 {
            return Err(HeadArenaError::NoSteps);
        }
        let dt = 1.0 / cfg.num_inference_timesteps as f32;
        let mut weights = PackedWeights::new(dtype);
        for w in HeadWeight::ALL {
            let m = source_matrix(ws, cfg, embodiment, dt, w)?;
            weights.push(w, &w.name(), m)?;
        }
        Ok(HeadArena {
            embodiment,
            dt,
            weights,
        })
    }

    /// Tiles in the whole head arena (sum of the entries' `num_tiles`).
    pub fn total_tiles(&self) -> usize {
        self.weights.total_tiles()
    }

    /// The packed tiles of `w` (its share of the arena's bytes).
    pub fn weight_bytes(&self, w: HeadWeight) -> &[u8] {
        self.weights.bytes_of(self.entry(w))
    }

    /// The decoded `[K, N]` values of `w`: exactly what the device multiplies with.
    pub fn try_weight(&self, w: HeadWeight) -> Result<Vec<f32>, HeadArenaError> {
        Ok(self.weights.decode(self.entry(w))?)
    }

    /// The entry of `w` (every head weight is packed: [`HeadArena::build`]).
    pub fn entry(&self, w: HeadWeight) -> &HeadEntry {
        let i = HeadWeight::ALL.iter().position(|x| *x == w).unwrap_or(0);
        &self.weights.entries[i]
    }

    /// How `w`'s tiles are split over the compute cores (the stream order of its tiles).
    pub fn split(&self, w: HeadWeight) -> MatmulSplit {
        self.weights.split(self.entry(w))
    }
}

/// `{prefix}.W` `[E, K, N]` and `{prefix}.b` `[E, N]` of `CategorySpecificLinear`, slot `emb`.
fn cat_linear(
    ws: &dyn WeightSource,
    prefix: &str,
    e: usize,
    emb: usize,
    k: usize,
    n: usize,
) -> Result<KnMatrix, WeightError> {
    let w = ws.tensor(&format!("{prefix}.W"), &[e, k, n])?;
    let b = ws.tensor(&format!("{prefix}.b"), &[e, n])?;
    Ok(KnMatrix {
        kn_shape: [k, n],
        kn: w.data().slice(emb * k * n, k * n).to_f32_vec(),
        bias: b.data().slice(emb * n, n).to_f32_vec(),
    })
}

/// The `[K, N]` matrix and bias of `w` for embodiment `emb`, as [`HeadWeight`] documents them.
fn source_matrix(
    ws: &dyn WeightSource,
    cfg: &Gr00tConfig,
    emb: usize,
    dt: f32,
    w: HeadWeight,
) -> Result<KnMatrix, WeightError> {
    let e = cfg.max_num_embodiments;
    let (d, hs) = (cfg.input_embedding_dim, cfg.hidden_size);
    let (sd, ad) = (cfg.max_state_dim, cfg.max_action_dim);
    let cat = |name: &str, k, n| cat_linear(ws, &format!("action_head.{name}"), e, emb, k, n);
    let model = |name: &str| format!("action_head.model.{name}");
    // The DiT's own width, as `DitWeights::load` reads its output layer (equal to D in a valid
    // config).
    let dc = &cfg.diffusion_model_cfg;
    let dit_d = dc.num_attention_heads * dc.attention_head_dim;
    Ok(match w {
        HeadWeight::StateL1 => cat("state_encoder.layer1", sd, hs)?,
        HeadWeight::StateL2 => cat("state_encoder.layer2", hs, d)?,
        HeadWeight::ActW1 => cat("action_encoder.W1", ad, d)?,
        // W2 multiplies cat(W1 out, time encoding): rows 0..D take the actions, D..2D the time.
        HeadWeight::ActW2Act => {
            let mut m = cat("action_encoder.W2", 2 * d, d)?;
            m.kn.truncate(d * d);
            m.kn_shape = [d, d];
            m.bias = vec![0.0; d];
            m
        }
        HeadWeight::ActW2Time => {
            let mut m = cat("action_encoder.W2", 2 * d, d)?;
            m.kn.drain(..d * d);
            m.kn_shape = [d, d];
            m
        }
        HeadWeight::ActW3 => cat("action_encoder.W3", d, d)?,
        HeadWeight::ProjOut1 => {
            // The reference chunks the output as (shift, scale); the device's LayerNorm reads
            // (scale, shift), as the blocks' AdaLN rows are ordered.
            let mut m = linear(ws, &model("proj_out_1"), dit_d, 2 * dit_d)?;
            for row in m.kn.chunks_exact_mut(2 * dit_d) {
                row.rotate_left(dit_d);
            }
            m.bias.rotate_left(dit_d);
            m
        }
        HeadWeight::ProjOut2 => linear(ws, &model("proj_out_2"), dit_d, dc.output_dim)?,
        HeadWeight::DecL1 => cat("action_decoder.layer1", hs, hs)?,
        HeadWeight::DecL2 => {
            let mut m = cat("action_decoder.layer2", hs, ad)?;
            m.kn.iter_mut()
                .chain(m.bias.iter_mut())
                .for_each(|v| *v *= dt);
            m
        }
    })
}

#[cfg(test)]
mod tests {
    use tt_blackhole::bf16::round_to_bf16;
    use tt_blackhole::bfp::{BfpFormat, encode_tiles, pack_row_major, unpack_row_major};
    use tt_blackhole::tile::tilize;

    use super::*;
    use crate::golden_case::case_dir;
    use gr00t_runtime::config::ModelConfig;
    use gr00t_runtime::weights::WeightStore;

    const DTYPES: [ArenaDtype; 3] = [ArenaDtype::Bfp8B, ArenaDtype::Bfp4B, ArenaDtype::Bf16];

    /// `[K, N]` and bias of `w` written out from the checkpoint tensors, independently of
    /// `source_matrix`.
    fn expected(ws: &WeightStore, cfg: &Gr00tConfig, emb: usize, w: HeadWeight) -> KnMatrix {
        let (d, hs) = (cfg.input_embedding_dim, cfg.hidden_size);
        let (sd, ad, e) = (
            cfg.max_state_dim,
            cfg.max_action_dim,
            cfg.max_num_embodiments,
        );
        let od = cfg.diffusion_model_cfg.output_dim;
        let dt = 1.0 / cfg.num_inference_timesteps as f32;
        let cat = |name: &str, k: usize, n: usize| {
            let w = ws
                .f32(&format!("action_head.{name}.W"), &[e, k, n])
                .unwrap();
            let b = ws.f32(&format!("action_head.{name}.b"), &[e, n]).unwrap();
            let wk = move |r: usize, c: usize| w[(emb * k + r) * n + c];
            (wk, b[emb * n..(emb + 1) * n].to_vec(), k, n)
        };
        let lin = |name: &str, k: usize, n: usize| {
            let w = ws
                .f32(&format!("action_head.model.{name}.weight"), &[n, k])
                .unwrap();
            let b = ws
                .f32(&format!("action_head.model.{name}.bias"), &[n])
                .unwrap();
            (w, b)
        };
        let from = |k: usize, n: usize, f: &dyn Fn(usize, usize) -> f32, bias: Vec<f32>| {
            let kn = (0..k * n).map(|i| f(i / n, i % n)).collect();
            KnMatrix {
                kn_shape: [k, n],
                kn,
                bias,
            }
        };
        match w {
            HeadWeight::StateL1 => {
                let (f, b, k, n) = cat("state_encoder.layer1", sd, hs);
                from(k, n, &f, b)
            }
            HeadWeight::StateL2 => {
                let (f, b, k, n) = cat("state_encoder.layer2", hs, d);
                from(k, n, &f, b)
            }
            HeadWeight::ActW1 => {
                let (f, b, k, n) = cat("action_encoder.W1", ad, d);
                from(k, n, &f, b)
            }
            HeadWeight::ActW2Act => {
                let (f, _, _, _) = cat("action_encoder.W2", 2 * d, d);
                from(d, d, &f, vec![0.0; d])
            }
            HeadWeight::ActW2Time => {
                let (f, b, _, _) = cat("action_encoder.W2", 2 * d, d);
                from(d, d, &|r, c| f(d + r, c), b)
            }
            HeadWeight::ActW3 => {
                let (f, b, k, n) = cat("action_encoder.W3", d, d);
                from(k, n, &f, b)
            }
            HeadWeight::ProjOut1 => {
                // Reference output j < D is shift, j >= D scale; stored as [scale | shift].
                let (wt, b) = lin("proj_out_1", d, 2 * d);
                let src = |c: usize| (c + d) % (2 * d);
                let bias = (0..2 * d).map(|c| b[src(c)]).collect();
                from(d, 2 * d, &|r, c| wt[src(c) * d + r], bias)
            }
            HeadWeight::ProjOut2 => {
                let (wt, b) = lin("proj_out_2", d, od);
                from(d, od, &|r, c| wt[c * d + r], b)
            }
            HeadWeight::DecL1 => {
                let (f, b, k, n) = cat("action_decoder.layer1", hs, hs);
                from(k, n, &f, b)
            }
            HeadWeight::DecL2 => {
                let (f, b, k, n) = cat("action_decoder.layer2", hs, ad);
                from(
                    k,
                    n,
                    &|r, c| dt * f(r, c),
                    b.iter().map(|v| dt * v).collect(),
                )
            }
        }
    }

    /// What the codec makes of a row-major `[K, N]` matrix: the values the device must see.
    fn quantized(dtype: ArenaDtype, m: &[f32], k: usize, n: usize) -> Vec<f32> {
        match BfpFormat::from_data_format(dtype.format()) {
            Some(f) => unpack_row_major(f, &pack_row_major(f, m, k, n), k, n),
            None => m.iter().map(|&v| round_to_bf16(v)).collect(),
        }
    }

    fn tiny() -> (WeightStore, Gr00tConfig) {
        let cfg = ModelConfig::from_dir(&case_dir())
            .expect("tiny config")
            .gr00t;
        (
            WeightStore::open_dir(&case_dir()).expect("tiny weights"),
            cfg,
        )
    }

    #[test]
    fn packed_head_is_the_checkpoint_quantized_in_stream_order() {
        let (ws, cfg) = tiny();
        // Slot 3: not slot 0, so a wrong slice offset shows.
        let emb = 3;
        assert_eq!(cfg.num_inference_timesteps, 4);
        for dtype in DTYPES {
            let a = HeadArena::build(&ws, &cfg, emb, dtype).unwrap();
            assert_eq!(
                (a.dt, a.embodiment, a.weights.compute_cores),
                (0.25, emb, tt_blackhole::arena::layout::COMPUTE_CORES)
            );
            assert_eq!(a.weights.tile_bytes, dtype.format().tile_bytes());
            assert_eq!(
                a.weights.bytes.len(),
                a.total_tiles() * a.weights.tile_bytes
            );
            let mut next = 0;
            for (e, w) in a.weights.entries.iter().zip(HeadWeight::ALL) {
                assert_eq!(e.weight, w);
                let want = expected(&ws, &cfg, emb, w);
                let [k, n] = want.kn_shape;
                assert_eq!(e.kn_shape, [k, n], "{w:?}");
                assert_eq!(e.tiles, [k.div_ceil(32), n.div_ceil(32)], "{w:?}");
                assert_eq!((e.first_tile, e.num_tiles), (next, e.tiles[0] * e.tiles[1]));
                next += e.num_tiles;
                assert_eq!(e.bias, want.bias, "{w:?} bias");
                // The bytes: the codec's tiles of the expected matrix, in split stream order.
                let tiled = tilize(&want.kn, k, n, 0.0f32);
                let mut rm = vec![0u8; e.num_tiles * a.weights.tile_bytes];
                encode_tiles(dtype.format(), &tiled, &mut rm).unwrap();
                let tb = a.weights.tile_bytes;
                let packed = a.weight_bytes(w);
                for (i, (kt, nt)) in a.split(w).stream_order().enumerate() {
                    let j = kt * e.tiles[1] + nt;
                    assert!(
                        packed[i * tb..(i + 1) * tb] == rm[j * tb..(j + 1) * tb],
                        "{w:?} {dtype}: stream tile {i} is not tile ({kt}, {nt})"
                    );
                }
                // Decoding gives the codec's quantization of the matrix.
                let got = a.try_weight(w).unwrap();
                assert_eq!(got, quantized(dtype, &want.kn, k, n), "{w:?} {dtype}");
            }
            assert_eq!(next, a.total_tiles());
            // dt = 1/4 is a power of two: folding it in commutes with the quantization.
            let e = a.entry(HeadWeight::DecL2);
            let [k, n] = e.kn_shape;
            let cat = ws
                .f32("action_head.action_decoder.layer2.W", &[32, k, n])
                .unwrap();
            let raw = &cat[emb * k * n..(emb + 1) * k * n];
            let scaled: Vec<f32> = quantized(dtype, raw, k, n)
                .iter()
                .map(|v| v * 0.25)
                .collect();
            assert_eq!(a.weight(HeadWeight::DecL2), scaled, "{dtype}");
        }
    }

    /// Every pad of every tile decodes to exactly 0 (the emulation's padding argument).
    #[test]
    fn padding_decodes_to_zero() {
        let (ws, cfg) = tiny();
        for dtype in DTYPES {
            let a = HeadArena::build(&ws, &cfg, 0, dtype).unwrap();
            let mut padded = 0;
            for e in &a.weights.entries {
                let mut tiled = vec![0f32; e.num_tiles * 1024];
                tt_blackhole::bfp::decode_tiles(
                    dtype.format(),
                    a.weight_bytes(e.weight),
                    &mut tiled,
                )
                .unwrap();
                for ((kt, nt), tile) in a.split(e.weight).stream_order().zip(tiled.chunks(1024)) {
                    for r in 0..32 {
                        for c in 0..32 {
                            if kt * 32 + r >= e.kn_shape[0] || nt * 32 + c >= e.kn_shape[1] {
                                padded += 1;
                                let v = tile[tt_blackhole::tile::face_index(r, c)];
                                assert_eq!(v.to_bits(), 0, "{:?} pad {dtype}", e.weight);
                            }
                        }
                    }
                }
            }
            // The tiny widths (24, 36, 40, 64) are all padded somewhere.
            assert!(padded > 0);
        }
    }

    #[test]
    fn bad_embodiment_steps_and_missing_tensors_are_typed_errors() {
        let (ws, mut cfg) = tiny();
        let err = HeadArena::build(&ws, &cfg, 32, ArenaDtype::Bfp8B).unwrap_err();
        assert!(
            matches!(
                err,
                HeadArenaError::Embodiment {
                    embodiment: 32,
                    max: 32
                }
            ),
            "{err}"
        );
        let err = HeadArena::build(&WeightStore::new(), &cfg, 0, ArenaDtype::Bf16).unwrap_err();
        let HeadArenaError::Weights(WeightError::Missing { name, .. }) = &err else {
            panic!("not a missing tensor: {err}")
        };
        assert_eq!(name, "action_head.state_encoder.layer1.W");
        cfg.hidden_size += 1;
        let err = HeadArena::build(&ws, &cfg, 0, ArenaDtype::Bf16).unwrap_err();
        assert!(
            matches!(err, HeadArenaError::Weights(WeightError::Shape { .. })),
            "{err}"
        );
        cfg.hidden_size -= 1;
        cfg.num_inference_timesteps = 0;
        let err = HeadArena::build(&ws, &cfg, 0, ArenaDtype::Bf16).unwrap_err();
        assert!(matches!(err, HeadArenaError::NoSteps), "{err}");
    }

    /// The model's error keeps the head arena's as its source, typed (the model crate does
    /// not know the type): a report that walks the chain reaches it, a caller can downcast.
    #[test]
    fn a_head_arena_error_is_the_model_errors_typed_source() {
        let (ws, cfg) = tiny();
        let err: ModelError = HeadArena::build(&ws, &cfg, 32, ArenaDtype::Bfp8B)
            .unwrap_err()
            .into();
        assert!(matches!(err, ModelError::HeadArena(_)), "{err}");
        assert_eq!(
            err.to_string(),
            "action head arena: embodiment 32 is not below max_num_embodiments 32"
        );
        let source = std::error::Error::source(&err).expect("the head arena's error");
        assert!(
            matches!(
                source.downcast_ref::<HeadArenaError>(),
                Some(HeadArenaError::Embodiment { embodiment: 32, .. })
            ),
            "{source}"
        );
    }
}
