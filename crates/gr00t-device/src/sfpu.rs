//! Our SFPU library on the device (`kernels/sfpu/sfpu_lib.h`): exp, reciprocal, rsqrt, ReLU, SiLU,
//! the tanh form of GELU (what the N1.6 DiT's FeedForward uses, diffusers `gelu-approximate`) and
//! its exact erf form (the Eagle projector's),
//! written with Blackhole's low-level `TTI_SFP*` instruction macros only, so the same source
//! builds with tt-metal's JIT on a card and with the simulator's compiler stand-in here.
//!
//! [`eltwise`] runs one op over a tensor in one device program (our tile reader and writer,
//! `kernels/reader_tiles.cpp` and `kernels/writer_tiles.cpp`, and the compute kernel
//! `kernels/sfpu/eltwise_sfpu.cpp` with the library pasted in): the unit each op is tested with
//! against f64, and the building block the on-device block pieces reuse.

use super::registry::with_cb_ids;
use super::worker::{TtnnWorker, WorkerError};

/// The SFPU library: one row routine per op, and the tile driver that runs a routine over DST.
pub const SFPU_LIB: &str = include_str!("kernels/sfpu/sfpu_lib.h");
/// The compute kernel of [`eltwise`]: copy a tile to DST, run the op on the SFPU, pack it.
pub const ELTWISE_KERNEL: &str = include_str!("kernels/sfpu/eltwise_sfpu.cpp");
/// Reader of a run of whole tiles into CB 0 (its CB ids pasted in by [`with_cb_ids`]).
pub const READER_TILES_KERNEL: &str = include_str!("kernels/reader_tiles.cpp");
/// Writer of CB 16's tiles to a run of whole tiles.
pub const WRITER_TILES_KERNEL: &str = include_str!("kernels/writer_tiles.cpp");

/// Where a compute kernel takes the library (a marker line, replaced by [`SFPU_LIB`]).
const LIB_MARKER: &str = "//@@GR00T_SFPU_LIB@@";
/// The pieces our compute kernels share (`kernels/compute_pieces.h`: a pass over tiles, DST 0
/// packed as a tile, a row reduce, the row softmax), one copy for the attention, row softmax,
/// LayerNorm and matmul-end kernels.
pub const COMPUTE_PIECES: &str = include_str!("kernels/compute_pieces.h");
/// Where a compute kernel takes [`COMPUTE_PIECES`] (a marker line after the library's, outside
/// its `TRISC_MATH` block: the pieces run on all three threads).
const PIECES_MARKER: &str = "//@@GR00T_COMPUTE_PIECES@@";

/// One element-wise op of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SfpuOp {
    /// e^x (+inf from x >= 88.72, 0 below the smallest normal fp32).
    Exp,
    /// 1/x (±0 gives ±inf, |x| >= 2^126 gives ±0).
    Reciprocal,
    /// 1/√x for x >= 0 (+0 gives +inf, +inf gives 0, negative NaN).
    Rsqrt,
    /// max(x, 0).
    Relu,
    /// x·sigmoid(x).
    Silu,
    /// 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))), computed as x·sigmoid(2z).
    GeluTanh,
    /// x·Φ(x) = 0.5·x·erfc(−x/√2): the exact GELU.
    GeluErf,
}

impl SfpuOp {
    /// Every op, in the order the tests run them.
    pub const ALL: [SfpuOp; 7] = [
        SfpuOp::Exp,
        SfpuOp::Reciprocal,
        SfpuOp::Rsqrt,
        SfpuOp::Relu,
        SfpuOp::Silu,
        SfpuOp::GeluTanh,
        SfpuOp::GeluErf,
    ];

    /// The op's row routine in `sfpu_lib.h`.
    pub fn row_routine(self) -> &'static str {
        match self {
            SfpuOp::Exp => "gr00t_sfpu::exp_row",
            SfpuOp::Reciprocal => "gr00t_sfpu::recip_row",
            SfpuOp::Rsqrt => "gr00t_sfpu::rsqrt_row",
            SfpuOp::Relu => "gr00t_sfpu::relu_row",
            SfpuOp::Silu => "gr00t_sfpu::silu_row",
            SfpuOp::GeluTanh => "gr00t_sfpu::gelu_tanh_row",
            SfpuOp::GeluErf => "gr00t_sfpu::gelu_erf_row",
        }
    }

    /// The op's mathematical definition in f64, evaluated in a form without cancellation (the
    /// reference the device is tested against).
    pub fn reference(self, x: f64) -> f64 {
        match self {
            SfpuOp::Exp => x.exp(),
            SfpuOp::Reciprocal => 1.0 / x,
            SfpuOp::Rsqrt => 1.0 / x.sqrt(),
            SfpuOp::Relu => x.max(0.0),
            SfpuOp::Silu => x / (1.0 + (-x).exp()),
            SfpuOp::GeluTanh => {
                // 0.5 (1 + tanh z) = 1 / (1 + e^(-2z)): no 1 - 1 cancellation in the far tail.
                let z = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                x / (1.0 + (-2.0 * z).exp())
            }
            // Φ(x) = erfc(−x/√2)/2, with erfc from its own series and continued fraction (not
            // the fit the device evaluates).
            SfpuOp::GeluErf => 0.5 * x * erfc(-x / std::f64::consts::SQRT_2),
        }
    }

    /// The compute kernel source of this op: [`ELTWISE_KERNEL`] with the library pasted in and
    /// the row routine chosen (one JIT build per op; tt-metal caches it by source).
    pub fn compute_kernel(self) -> String {
        compose_compute(ELTWISE_KERNEL, &[("GR00T_SFPU_ROW", self.row_routine())])
    }
}

/// erfc in f64 to about 1e-12 relative: for |z| < 2.5 as 1 − erf(z) with erf from its series of
/// positive terms, erf(z) = 2/√π · e^(−z²) · Σ 2ⁿ z^(2n+1) / (1·3·…·(2n+1)) (erfc ≥ 4e-4 there,
/// so the subtraction loses nothing that matters); beyond, Laplace's continued fraction
/// erfc(z) = e^(−z²)/√π · 1/(z + ½/(z + 1/(z + 3⁄2/(z + …)))), evaluated from the bottom.
pub fn erfc(z: f64) -> f64 {
    if z < 0.0 {
        return 2.0 - erfc(-z);
    }
    let front = (-z * z).exp() / std::f64::consts::PI.sqrt();
    if z < 2.5 {
        let (mut term, mut sum) = (z, z);
        for n in 1..200 {
            term *= 2.0 * z * z / (2 * n + 1) as f64;
            sum += term;
            if term < sum * 1e-17 {
                break;
            }
        }
        return 1.0 - 2.0 * front * sum;
    }
    let mut f = z;
    for k in (1..=80).rev() {
        f = z + (k as f64 / 2.0) / f;
    }
    front / f
}

/// `kernel` with [`SFPU_LIB`], [`COMPUTE_PIECES`] and its CB ids (the registry's,
/// [`with_cb_ids`]) pasted in at their markers (a kernel without a marker goes without that
/// text) and `defines` prepended.
pub fn compose_compute(kernel: &str, defines: &[(&str, &str)]) -> String {
    let mut src: String = defines
        .iter()
        .map(|(k, v)| format!("#define {k} {v}\n"))
        .collect();
    let pasted =
        kernel
            .replacen(LIB_MARKER, SFPU_LIB, 1)
            .replacen(PIECES_MARKER, COMPUTE_PIECES, 1);
    src.push_str(&with_cb_ids(&pasted));
    src
}

/// The format of a tensor's tiles on the device: bfloat16 (values rounded to nearest even on
/// the way in) or float32 (unpacked straight into the fp32 DST on the way in).
pub use super::protocol::ActDtype as TileDtype;

/// What an element-wise op needs besides its input.
#[derive(Debug, Clone, Copy)]
pub struct EltwiseSpec {
    /// The op.
    pub op: SfpuOp,
    /// Rows and columns of the input (whole 32x32 tiles).
    pub rows: usize,
    /// Columns of the input.
    pub cols: usize,
    /// How the input is held on the device.
    pub input: TileDtype,
    /// How the output is packed.
    pub output: TileDtype,
    /// Compute cores (of the grid's first row) the tiles are shared over.
    pub cores: usize,
}

impl EltwiseSpec {
    /// Whether an input of `len` values fits: whole tiles, filled.
    pub fn check(&self, len: usize) -> Result<(), SfpuError> {
        let (rows, cols) = (self.rows, self.cols);
        let what = if rows == 0 || cols == 0 || rows % 32 != 0 || cols % 32 != 0 {
            format!("[{rows}, {cols}] is not whole 32x32 tiles")
        } else if len != rows * cols {
            format!("{len} values for [{rows}, {cols}]")
        } else {
            return Ok(());
        };
        Err(SfpuError::Shape {
            op: format!("{:?}", self.op),
            what,
        })
    }
}

/// An element-wise op's result.
#[derive(Debug, Clone)]
pub struct EltwiseRun {
    /// The output values (of the output format, widened to f32), row-major `[rows, cols]`.
    pub values: Vec<f32>,
    /// Time in the device program, milliseconds (worker side; the simulator's is not silicon's).
    pub program_ms: f64,
}

/// A failure of an on-device op.
#[derive(Debug, thiserror::Error)]
pub enum SfpuError {
    /// The input does not fit the op's shape.
    #[error("{op}: {what}")]
    Shape {
        /// The device op (`Exp`, `layernorm`, …).
        op: String,
        /// What is wrong.
        what: String,
    },
    /// The worker or the device failed.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The op's program cannot be laid out (a value past its word, too many args).
    #[error(transparent)]
    Program(#[from] super::lower::LowerError),
    /// The worker answered with something other than the protocol promises.
    #[error("{op}: the worker returned {got} bytes, want {want}")]
    Reply {
        /// The device op.
        op: String,
        /// Bytes returned.
        got: usize,
        /// Bytes expected.
        want: usize,
    },
}

/// Run `spec.op` over `x` (`[rows, cols]`, row-major) in one device program on the open
/// device behind `worker`.
pub fn eltwise(
    worker: &mut TtnnWorker,
    spec: &EltwiseSpec,
    x: &[f32],
) -> Result<EltwiseRun, SfpuError> {
    spec.check(x.len())?;
    let EltwiseSpec { op, rows, cols, .. } = *spec;
    let kernels = super::protocol::KernelSet {
        reader: "reader".into(),
        writer: "writer".into(),
        compute: "compute".into(),
    };
    let program = super::one_program::eltwise_program(spec, &kernels)?;
    let sources = super::one_program::sources([
        ("reader", with_cb_ids(READER_TILES_KERNEL)),
        (
            "writer",
            super::task_table::with_task_table(WRITER_TILES_KERNEL),
        ),
        ("compute", op.compute_kernel()),
    ]);
    let mut inputs = super::one_program::Inputs::default();
    inputs.add("x", rows, cols, spec.input, x);
    let label = program.label.clone();
    super::one_program::run_program(worker, inputs, program, sources, ("y", rows, cols), &label)
}
