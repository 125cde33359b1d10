//! CPU kernels of the reference backend: GEMM (bf16/f32 weights, f32 activations), attention,
//! normalizations and activations.

pub mod attention;
pub mod gemm;
pub mod norms;
pub mod rope;
