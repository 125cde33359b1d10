//! The CPU emulation of the action head's device stages, from the packed values of a
//! [`HeadArena`]: what the device's head programs must output, op by op.
//!
//! Every matmul is the DiT's ([`super::emulator`]): the activation packed to bf16, fp32 sums
//! per work unit of `tt_blackhole::split` added in piece order, then the end the
//! `bias_act_rows` kernel gives it: `ACT(round_bf16(sum + bf16(bias)))`, packed to bf16 (or
//! kept fp32), optionally plus an fp32 residual after the activation.
//!
//! Padding: the device computes whole tiles. A weight's padded rows and columns decode to 0
//! and the bias tile is zero-padded, so a padded output column is `ACT(0) = 0` for every
//! [`HeadAct`] (ReLU(0) = SiLU(0) = 0): the next stage's padded K rows multiply zeros, and a
//! residual's padding (the position embedding, the chunk) is the only thing that can make an
//! output pad nonzero. The tests check it on the padded matrices.

use tt_blackhole::bf16::round_to_bf16;

use super::emulator::split_matmul;
use super::head_arena::{HeadArena, HeadWeight};
use gr00t_runtime::cpu::norms::{gelu_erf, relu, silu};

/// The activation at a head matmul's end (applied in fp32 to the bf16-rounded sum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadAct {
    /// None.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x · sigmoid(x)`, as [`gr00t_runtime::cpu::norms::silu`] computes it.
    Silu,
    /// The exact GELU, as [`gr00t_runtime::cpu::norms::gelu_erf`] computes it (no head stage
    /// uses it: the device's erf end is tested on a head weight until the projector has an
    /// arena of its own).
    GeluErf,
}

impl HeadAct {
    fn apply(self, v: &mut [f32]) {
        match self {
            HeadAct::None => {}
            HeadAct::Relu => relu(v),
            HeadAct::Silu => silu(v),
            HeadAct::GeluErf => gelu_erf(v),
        }
    }
}

impl HeadArena {
    /// The decoded `[K, N]` values of `w` (what the device multiplies with).
    ///
    /// # Panics
    /// If the arena's bytes no longer match its entries (fields changed after
    /// [`HeadArena::build`]); [`HeadArena::try_weight`] returns that as an error.
    pub fn weight(&self, w: HeadWeight) -> Vec<f32> {
        self.try_weight(w)
            .unwrap_or_else(|e| panic!("head arena changed after it was built: {e}"))
    }

    /// `x` `[m, K]` · W + bias (`bias`, or the entry's own) with `act`, as the device computes
    /// it: x packed to bf16, the split's fp32 sums, `ACT(round_bf16(sum + bf16(bias)))`, then
    /// packed to bf16 unless `out_f32`. Returns `[m, N]`.
    ///
    /// # Panics
    /// If `x` is not `m · K` long or `bias` not `N` long (the stage functions size them).
    pub fn linear(
        &self,
        w: HeadWeight,
        x: &[f32],
        m: usize,
        bias: Option<&[f32]>,
        act: HeadAct,
        out_f32: bool,
    ) -> Vec<f32> {
        let e = self.entry(w);
        let [k, n] = e.kn_shape;
        assert_eq!(x.len(), m * k, "{w:?}: x is not [{m}, {k}]");
        let bias = bias.unwrap_or(&e.bias);
        assert_eq!(bias.len(), n, "{w:?}: bias is not [{n}]");
        let xb: Vec<f32> = x.iter().map(|&v| round_to_bf16(v)).collect();
        let mut y = split_matmul(&xb, m, &self.weight(w), k, n, &self.split(w));
        for row in y.chunks_exact_mut(n) {
            for (v, &b) in row.iter_mut().zip(bias) {
                *v = round_to_bf16(*v + round_to_bf16(b));
            }
            act.apply(row);
            if !out_f32 {
                row.iter_mut().for_each(|v| *v = round_to_bf16(*v));
            }
        }
        y
    }
}

/// The state encoder: `state` `[max_state_dim]` → the state token `[D]` (fp32 out).
pub fn emulate_state(arena: &HeadArena, state: &[f32]) -> Vec<f32> {
    let h = arena.linear(HeadWeight::StateL1, state, 1, None, HeadAct::Relu, false);
    arena.linear(HeadWeight::StateL2, &h, 1, None, HeadAct::None, true)
}

/// The time half of the action encoder's W2 on the sinusoidal encoding `tau_enc` `[D]`
/// ([`gr00t_runtime::model::action_head::action_time_encoding`]), W2's bias included: the bias of
/// [`HeadWeight::ActW2Act`] for this timestep, `[D]` (fp32 out).
pub fn emulate_time_bias(arena: &HeadArena, tau_enc: &[f32]) -> Vec<f32> {
    arena.linear(HeadWeight::ActW2Time, tau_enc, 1, None, HeadAct::None, true)
}

/// The action encoder plus the position embedding: `x` `[hz, max_action_dim]`, `time_bias`
/// from [`emulate_time_bias`], `pos` `[hz, D]` → `[hz, D]`: W1 → W2's action half with the
/// time bias, SiLU → W3, whose end adds `pos` in fp32: `pos + round_bf16(sum + bf16(b3))`.
///
/// # Panics
/// If `pos` is not `[hz, D]` for the `hz` rows of `x`.
pub fn emulate_actions(arena: &HeadArena, x: &[f32], time_bias: &[f32], pos: &[f32]) -> Vec<f32> {
    let ad = arena.entry(HeadWeight::ActW1).kn_shape[0];
    let hz = x.len() / ad;
    let h = arena.linear(HeadWeight::ActW1, x, hz, None, HeadAct::None, false);
    let h = arena.linear(
        HeadWeight::ActW2Act,
        &h,
        hz,
        Some(time_bias),
        HeadAct::Silu,
        false,
    );
    let mut y = arena.linear(HeadWeight::ActW3, &h, hz, None, HeadAct::None, true);
    assert_eq!(pos.len(), y.len(), "position embedding is not [{hz}, D]");
    y.iter_mut().zip(pos).for_each(|(v, p)| *v += p);
    y
}

/// The output layer's modulation row: `silu_temb` `[D]` → `[scale | shift]` `[2D]` (fp32 out).
pub fn emulate_proj_rows(arena: &HeadArena, silu_temb: &[f32]) -> Vec<f32> {
    arena.linear(
        HeadWeight::ProjOut1,
        silu_temb,
        1,
        None,
        HeadAct::None,
        true,
    )
}

/// The action decoder and the Euler update: `y` `[hz, output_dim]` (the DiT's action rows),
/// `x` `[hz, max_action_dim]` → the next chunk `[hz, max_action_dim]`: layer 1 with ReLU, then
/// layer 2 (scaled by `dt`) whose end adds `x`: `x + round_bf16(sum + bf16(dt·b))`.
///
/// # Panics
/// If `y` and `x` do not have the same rows.
pub fn emulate_decode_euler(arena: &HeadArena, y: &[f32], x: &[f32]) -> Vec<f32> {
    let ad = arena.entry(HeadWeight::DecL2).kn_shape[1];
    let hz = x.len() / ad;
    let h = arena.linear(HeadWeight::DecL1, y, hz, None, HeadAct::Relu, false);
    let mut v = arena.linear(HeadWeight::DecL2, &h, hz, None, HeadAct::None, true);
    v.iter_mut().zip(x).for_each(|(a, b)| *a += b);
    v
}

#[cfg(test)]
mod tests {
    use safetensors::SafeTensors;
    use tt_blackhole::ArenaDtype;
    use tt_blackhole::bfp::decode_tiles;
    use tt_blackhole::tile::face_index;

    use super::*;
    use crate::golden_case::{case_dir, pcc};
    use gr00t_runtime::config::{Gr00tConfig, ModelConfig};
    use gr00t_runtime::model::action_head::{ActionHead, action_time_encoding};
    use gr00t_runtime::weights::{DType, RandomWeights, WeightSource, WeightStore};

    const DTYPES: [ArenaDtype; 3] = [ArenaDtype::Bfp8B, ArenaDtype::Bfp4B, ArenaDtype::Bf16];

    /// One forward step's head inputs.
    struct Case {
        state: Vec<f32>,
        /// `[hz, max_action_dim]`.
        x: Vec<f32>,
        /// The DiT's action rows `[hz, output_dim]`.
        y: Vec<f32>,
        temb: Vec<f32>,
        step: usize,
    }

    /// One stage: (name, PCC, max abs error, max abs of the f32 reference).
    type Row = (&'static str, f64, f32, f32);

    fn compare(name: &'static str, got: &[f32], want: &[f32]) -> Row {
        assert_eq!(got.len(), want.len(), "{name}");
        assert!(got.iter().all(|v| v.is_finite()), "{name}");
        let err = got.iter().zip(want).map(|(a, b)| (a - b).abs());
        let top = want.iter().map(|v| v.abs()).fold(0.0, f32::max);
        (name, pcc(got, want), err.fold(0.0, f32::max), top)
    }

    /// Every stage's emulation against the f32 CPU model (`ActionHead`, `DitWeights`).
    fn stages(head: &ActionHead, ws: &dyn WeightSource, a: &HeadArena, c: &Case) -> Vec<Row> {
        let cfg = &head.cfg;
        let (d, hz, e, emb) = (
            cfg.input_embedding_dim,
            cfg.action_horizon,
            cfg.max_num_embodiments,
            a.embodiment,
        );
        let tau = head.timestep(c.step);
        let enc = action_time_encoding(tau, d);
        // W2's time half plus its bias in f64 (the CPU model never forms it alone).
        let w2 = ws
            .f32("action_head.action_encoder.W2.W", &[e, 2 * d, d])
            .unwrap();
        let b2 = ws.f32("action_head.action_encoder.W2.b", &[e, d]).unwrap();
        let time_want: Vec<f32> = (0..d)
            .map(|j| {
                let w = |r: usize| w2[(emb * 2 * d + d + r) * d + j] as f64;
                let s: f64 = (0..d).map(|r| enc[r] as f64 * w(r)).sum();
                (s + b2[emb * d + j] as f64) as f32
            })
            .collect();
        let time_bias = emulate_time_bias(a, &enc);
        let pos = head.position_embedding(hz);
        let mut act_want = head.encode_actions(&c.x, tau, emb);
        act_want.iter_mut().zip(&pos).for_each(|(v, p)| *v += p);
        let mut silu_temb = c.temb.clone();
        silu(&mut silu_temb);
        // The reference's (shift, scale), stored as (scale, shift).
        let mut proj_want = head.dit.proj_out_1.forward(&silu_temb, 1);
        proj_want.rotate_left(d);
        let v = head.decode(&c.y, hz, emb);
        let euler_want: Vec<f32> = c.x.iter().zip(&v).map(|(x, v)| x + a.dt * v).collect();
        let euler = emulate_decode_euler(a, &c.y, &c.x);
        // The chunk dominates x + dt·v; the step alone shows the decoder's error.
        let step: Vec<f32> = euler.iter().zip(&c.x).map(|(e, x)| e - x).collect();
        let step_want: Vec<f32> = v.iter().map(|v| a.dt * v).collect();
        vec![
            compare(
                "state",
                &emulate_state(a, &c.state),
                &head.encode_state(&c.state, emb),
            ),
            compare("time_bias", &time_bias, &time_want),
            compare(
                "actions",
                &emulate_actions(a, &c.x, &time_bias, &pos),
                &act_want,
            ),
            compare("proj_rows", &emulate_proj_rows(a, &silu_temb), &proj_want),
            compare("decode_euler", &euler, &euler_want),
            compare("dt_velocity", &step, &step_want),
        ]
    }

    /// Reports the rows and asserts the bounds the measurements support (2026-12-06, both the
    /// tiny checkpoint and full width; worst stage in brackets):
    /// * bfp8_b: PCC >= 0.9999 [0.999923, tiny actions]; max abs error <= 2 % of the
    ///   reference's largest value [1.3 %];
    /// * bf16: PCC >= 0.99998 [0.999992]; max abs error <= 0.8 % [0.43 %];
    /// * bfp4_b (coarse by design; the DiT tests only bound it loosely too): PCC >= 0.98
    ///   [0.9840, tiny dt_velocity]; max abs error <= 25 % [16.3 %].
    fn check(what: &str, dtype: ArenaDtype, rows: &[Row]) {
        for (name, p, err, top) in rows {
            eprintln!(
                "{what} {dtype} {name:>12}: PCC {p:.6}  max abs err {err:.3e}  (max |f32| {top:.3})"
            );
        }
        let (min_pcc, rel_err) = match dtype {
            ArenaDtype::Bfp8B => (0.9999, 0.02),
            ArenaDtype::Bf16 => (0.99998, 0.008),
            ArenaDtype::Bfp4B => (0.98, 0.25),
        };
        for &(name, p, err, top) in rows {
            assert!(p >= min_pcc, "{what} {dtype} {name}: PCC {p}");
            assert!(
                err <= rel_err * top,
                "{what} {dtype} {name}: max abs error {err}"
            );
            // Not the f32 model: bf16 activations round even with bf16 weights.
            assert!(err > 0.0, "{what} {dtype} {name}: identical to f32");
        }
    }

    fn tap(st: &SafeTensors<'_>, name: &str) -> Vec<f32> {
        let v = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        v.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// The tiny golden checkpoint on the golden forward's own step-1 tensors.
    #[test]
    fn head_stages_match_f32_on_golden_case1() {
        let cfg = ModelConfig::from_dir(&case_dir()).unwrap().gr00t;
        let ws = WeightStore::open_dir(&case_dir()).unwrap();
        let head = ActionHead::load(&ws, &cfg).unwrap();
        let bytes = std::fs::read(case_dir().join("taps.safetensors")).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let (hz, od) = (cfg.action_horizon, cfg.diffusion_model_cfg.output_dim);
        let dit_out = tap(&st, "flow.step1.dit_output");
        let case = Case {
            state: tap(&st, "input.state"),
            x: tap(&st, "flow.step1.actions_in"),
            y: dit_out[od..(hz + 1) * od].to_vec(),
            temb: tap(&st, "flow.step1.temb"),
            step: 1,
        };
        let emb = {
            let v = st.tensor("input.embodiment_id").unwrap();
            i64::from_le_bytes(v.data()[..8].try_into().unwrap()) as usize
        };
        for dtype in DTYPES {
            let a = HeadArena::build(&ws, &cfg, emb, dtype).unwrap();
            let rows = stages(&head, &ws, &a, &case);
            check("tiny", dtype, &rows);
        }
    }

    /// Full N1.6 width (D 1536, hidden 1024, state/action 128, horizon 50) with seeded
    /// random bf16 weights (as the real checkpoint stores them); the DiT has no blocks, only
    /// its output layer is read.
    #[test]
    fn head_stages_match_f32_at_full_width() {
        let mut cfg = Gr00tConfig::full_size();
        cfg.diffusion_model_cfg.num_layers = 0;
        // Two slots keep the per-embodiment tensors small; slot 1 checks the slice offset.
        cfg.max_num_embodiments = 2;
        let ws = RandomWeights {
            seed: 39,
            dtype: DType::Bf16,
        };
        let head = ActionHead::load(&ws, &cfg).unwrap();
        let mut seed = 0x5eed_u64;
        let mut draw = |n: usize, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
                })
                .collect()
        };
        let (hz, od) = (cfg.action_horizon, cfg.diffusion_model_cfg.output_dim);
        let case = Case {
            state: draw(cfg.max_state_dim, 1.0),
            x: draw(hz * cfg.max_action_dim, 1.7),
            y: draw(hz * od, 2.0),
            temb: draw(cfg.input_embedding_dim, 2.0),
            step: 2,
        };
        for dtype in DTYPES {
            let a = HeadArena::build(&ws, &cfg, 1, dtype).unwrap();
            let rows = stages(&head, &ws, &a, &case);
            check("full", dtype, &rows);
        }
    }

    /// The device computes whole tiles: over the zero-padded matrices the emulation gives the
    /// same values and exact zeros in the pad columns, for every activation.
    #[test]
    fn padded_tiles_give_the_same_values_and_zero_pads() {
        let cfg = ModelConfig::from_dir(&case_dir()).unwrap().gr00t;
        let ws = WeightStore::open_dir(&case_dir()).unwrap();
        let a = HeadArena::build(&ws, &cfg, 0, ArenaDtype::Bfp8B).unwrap();
        let m = 3;
        for w in HeadWeight::ALL {
            let e = a.entry(w);
            let ([k, n], [kp, np]) = (e.kn_shape, [e.tiles[0] * 32, e.tiles[1] * 32]);
            let mut tiled = vec![0f32; e.num_tiles * 1024];
            decode_tiles(a.weights.dtype.format(), a.weight_bytes(w), &mut tiled).unwrap();
            let mut wp = vec![f32::NAN; kp * np];
            for ((kt, nt), t) in a.split(w).stream_order().zip(tiled.chunks(1024)) {
                for r in 0..32 {
                    for c in 0..32 {
                        wp[(kt * 32 + r) * np + nt * 32 + c] = t[face_index(r, c)];
                    }
                }
            }
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 29 % 31) as f32 - 15.0) / 9.0)
                .collect();
            let mut xp = vec![0f32; m * kp];
            for r in 0..m {
                for c in 0..k {
                    xp[r * kp + c] = round_to_bf16(x[r * k + c]);
                }
            }
            let mut bp = e.bias.clone();
            bp.resize(np, 0.0);
            for act in [HeadAct::None, HeadAct::Relu, HeadAct::Silu] {
                let want = a.linear(w, &x, m, None, act, false);
                let mut y = split_matmul(&xp, m, &wp, kp, np, &a.split(w));
                for row in y.chunks_exact_mut(np) {
                    for (v, &b) in row.iter_mut().zip(&bp) {
                        *v = round_to_bf16(*v + round_to_bf16(b));
                    }
                    act.apply(row);
                    row.iter_mut().for_each(|v| *v = round_to_bf16(*v));
                }
                for r in 0..m {
                    assert_eq!(
                        &y[r * np..r * np + n],
                        &want[r * n..(r + 1) * n],
                        "{w:?} {act:?}"
                    );
                    assert!(
                        y[r * np + n..(r + 1) * np].iter().all(|v| v.to_bits() == 0),
                        "{w:?} {act:?}: a pad column is not +0"
                    );
                }
            }
        }
    }
}
