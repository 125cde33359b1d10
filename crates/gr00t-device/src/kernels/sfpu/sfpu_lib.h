// SPDX-License-Identifier: Apache-2.0
// gr00t-megakernel's SFPU library: exp, reciprocal, rsqrt, ReLU, SiLU and GELU (the tanh form, which the N1.6 DiT's
// FeedForward and SigLIP2's MLP use, and the exact erf form of the Eagle projector) on the tile in DST, written only with the Blackhole
// low-level instruction macros (`TTI_SFP*`: one instruction word each, SFPU registers named by hand).
// Why not the SFPI C++ API (`sfpi::vFloat`): only Tenstorrent's SFPI GCC allocates its registers; these
// macros build with any RISC-V GCC and run on the ttsim simulator and on silicon alike.
//
// Conventions (every routine below keeps them):
// * A "row" routine works on the 32 lanes of LREG0 (4 DST rows x 8 columns: one SFPLOAD) and leaves its
//   result in LREG0. It clobbers the registers it lists; it never touches DST.
// * Numbers are fp32 inside the SFPU; with `fp32_dest_acc_en` DST holds fp32 too, and the packer rounds
//   the result once to the output format.
// * Condition codes: a routine that predicates lanes turns predication on with every lane on and leaves
//   it off with every lane on, so no row inherits a mask.
// * Constants that are not exact in bf16 are loaded as two 16-bit halves (SFPLOADI modes 8 and 10).
// * Special lanes are repaired after the arithmetic (the arithmetic may make NaN there first): there is
//   no branch per lane, only predicated writes.
//
// Only for the MATH thread (TRISC_MATH): the kernel that pastes this in wraps it in `#ifdef TRISC_MATH`.
#pragma once
#include <cstdint>

namespace gr00t_sfpu {

using ckernel::p_sfpu;

constexpr uint32_t L0 = p_sfpu::LREG0, L1 = p_sfpu::LREG1, L2 = p_sfpu::LREG2, L3 = p_sfpu::LREG3;
constexpr uint32_t L4 = p_sfpu::LREG4, L5 = p_sfpu::LREG5, L6 = p_sfpu::LREG6;
constexpr uint32_t ZERO = p_sfpu::LCONST_0;  // hardware constant 0.0
constexpr uint32_t ONE = p_sfpu::LCONST_1;   // hardware constant 1.0

// SFPLOADI instr_mod0: a bf16 immediate (lower half zeroed); write only the upper / lower half.
constexpr uint32_t IMM_BF16 = 0, IMM_HI = 8, IMM_LO = 10;
// SFPMAD / SFPMUL instr_mod1 bit 0: negate the first multiplicand.
constexpr uint32_t NEG_A = 1;
// SFPMOV instr_mod1 1: copy with the sign flipped.
constexpr uint32_t MOV_NEG = 1;
// SFPIADD instr_mod1: immediate operand (bit 0), dest = c - dest (bit 1), leave condition codes (bit 2).
constexpr uint32_t IADD_IMM = 1, IADD_C_MINUS_DEST = 2, IADD_NO_CC = 4;
// SFPSETCC instr_mod1: keep on the lanes whose register, read as int32, is < 0 / == 0 / >= 0.
constexpr uint32_t CC_NEG = 0, CC_ZERO = 6, CC_NONNEG = 4;
// SFPSWAP instr_mod1 1: dest <- min(dest, c), c <- max(dest, c), on every lane.
constexpr uint32_t SWAP_MINMAX = 1;
// SFPSHFT instr_mod1 1: shift dest by a signed immediate (left if positive, logical right if negative).
constexpr uint32_t SHFT_IMM = 1;
// SFPEXEXP instr_mod1 1: the raw 8-bit exponent field (bias kept) as an integer.
constexpr uint32_t EXEXP_RAW = 1;

constexpr uint32_t bits(float f) { return __builtin_bit_cast(uint32_t, f); }
constexpr uint32_t imm12(int v) { return uint32_t(v) & 0xFFF; }

// REG <- the fp32 constant with bit pattern B.
template <uint32_t REG, uint32_t B>
inline void load_f32() {
    if constexpr ((B & 0xFFFF) == 0) {
        TTI_SFPLOADI(REG, IMM_BF16, B >> 16);
    } else {
        TTI_SFPLOADI(REG, IMM_HI, B >> 16);
        TTI_SFPLOADI(REG, IMM_LO, B & 0xFFFF);
    }
}

inline void cc_on_all() { TTI_SFPENCC(3, 0, 0, 10); }  // predication on, every lane on
inline void cc_off() { TTI_SFPENCC(2, 0, 0, 10); }     // predication off, every lane on

// ---- exp --------------------------------------------------------------------------------------------
// e^x = 2^n e^r with n = round(x log2 e) and r = x - n ln 2 (ln 2 in two parts, each product fused in
// an SFPMAD, so r has no cancellation error), |r| <= ln 2 / 2; e^r by its degree-6 Taylor polynomial
// (truncation < 1.3e-7 relative); 2^n joins by adding n to the exponent field as an integer.
// * n is rounded with the 1.5 * 2^23 trick: t + 1.5 * 2^23 holds round(t) in its low mantissa bits, and
//   those bits shifted left by 23 are exactly n << 23 (1.5 * 2^23's own bits vanish in the shift).
// * x is first raised to -87.5: e^-87.5 is below the smallest normal fp32, the exponent field ends at 0
//   (a subnormal pattern, which the store to DST flushes to 0) and never wraps below it.
// * Lanes with x log2 e >= 128 (x >= 88.72...) overflow fp32: they get +inf.
// Clobbers LREG1..LREG4.
inline void exp_row() {
    TTI_SFPLOADI(L1, IMM_BF16, 0xC2AF);          // -87.5
    TTI_SFPSWAP(0, L0, L1, SWAP_MINMAX);          // L0 = x = max(x, -87.5)
    load_f32<L2, bits(1.44269504088896341f)>();   // log2 e
    TTI_SFPMUL(L0, L2, ZERO, L1, 0);              // L1 = t = x log2 e
    TTI_SFPMOV(0, L1, L2, 0);
    TTI_SFPADDI(0x4B40, L2, 0);                   // L2 = t + 1.5 * 2^23 (round(t) in the low bits)
    TTI_SFPMOV(0, L2, L3, 0);
    TTI_SFPADDI(0xCB40, L3, 0);                   // L3 = n = round(t), as a float
    load_f32<L4, bits(0.693145751953125f)>();     // ln 2, high part (n times it is exact)
    TTI_SFPMAD(L3, L4, L0, L0, NEG_A);            // r = x - n ln2_hi
    load_f32<L4, bits(1.42860682030941723e-6f)>();  // ln 2 - ln2_hi
    TTI_SFPMAD(L3, L4, L0, L0, NEG_A);            // r -= n ln2_lo
    // p = 1 + r (1 + r/2 (1 + r/3 (1 + r/4 (1 + r/5 (1 + r/6))))) in Horner form on the plain
    // coefficients 1/k!: p = ((((c6 r + c5) r + c4) r + c3) r + c2) r + 1) r + 1.
    load_f32<L3, bits(1.0f / 720.0f)>();
    load_f32<L4, bits(1.0f / 120.0f)>();
    TTI_SFPMAD(L3, L0, L4, L3, 0);
    load_f32<L4, bits(1.0f / 24.0f)>();
    TTI_SFPMAD(L3, L0, L4, L3, 0);
    load_f32<L4, bits(1.0f / 6.0f)>();
    TTI_SFPMAD(L3, L0, L4, L3, 0);
    TTI_SFPLOADI(L4, IMM_BF16, 0x3F00);           // 1/2
    TTI_SFPMAD(L3, L0, L4, L3, 0);
    TTI_SFPMAD(L3, L0, ONE, L3, 0);
    TTI_SFPMAD(L3, L0, ONE, L3, 0);               // L3 = p = e^r in [0.70, 1.42]
    TTI_SFPSHFT(23, 0, L2, SHFT_IMM);             // L2 = n << 23
    TTI_SFPIADD(0, L2, L3, IADD_NO_CC);           // L3 = bits(p) + (n << 23) = 2^n p
    TTI_SFPMOV(0, L3, L0, 0);
    TTI_SFPADDI(0xC300, L1, 0);                   // L1 = t - 128
    cc_on_all();
    TTI_SFPSETCC(0, L1, 0, CC_NONNEG);            // lanes with t >= 128
    TTI_SFPLOADI(L0, IMM_BF16, 0x7F80);           //   +inf
    cc_off();
}

// ---- reciprocal -------------------------------------------------------------------------------------
// 1/x from the SFPARECIP estimate y0 (a 7-bit table, ~2^-7.5 relative) and two Newton steps in the
// error form e = 1 - x y, y <- y + y e (each an SFPMAD; 7.5 -> 15 -> 30 bits, then fp32 rounding).
// Lanes where y0 is +-inf (x = +-0 or subnormal) or +-0 (|x| >= 2^126, inf) keep y0: the Newton form
// would make NaN there (0 * inf).
// Clobbers LREG1..LREG3.
inline void recip_row() {
    TTI_SFPARECIP(0, L0, L1, 0);                  // L1 = y0
    TTI_SFPMAD(L0, L1, ONE, L2, NEG_A);           // e = 1 - x y0
    TTI_SFPMAD(L1, L2, L1, L3, 0);                // L3 = y1 = y0 + y0 e
    TTI_SFPMAD(L0, L3, ONE, L2, NEG_A);           // e = 1 - x y1
    TTI_SFPMAD(L3, L2, L3, L0, 0);                // L0 = y2 = y1 + y1 e
    TTI_SFPEXEXP(0, L1, L2, EXEXP_RAW);           // L2 = exponent field of y0
    cc_on_all();
    TTI_SFPSETCC(0, L2, 0, CC_ZERO);              // y0 = +-0
    TTI_SFPMOV(0, L1, L0, 0);
    cc_on_all();
    TTI_SFPIADD(imm12(-255), L2, L2, IADD_IMM | IADD_NO_CC);
    TTI_SFPSETCC(0, L2, 0, CC_ZERO);              // y0 = +-inf
    TTI_SFPMOV(0, L1, L0, 0);
    cc_off();
}

// ---- rsqrt ------------------------------------------------------------------------------------------
// 1/sqrt(x) for x >= 0: the integer seed 0x5F3759DF - (bits(x) >> 1) (3.5 % at worst), then three Newton
// steps y <- y (1.5 - (x/2) y^2) (3.5e-2 -> 1.8e-3 -> 5e-6 -> fp32 rounding).
// x = +0 gives +inf, x < 0 (and -0) NaN, x = +inf 0.
// Clobbers LREG1..LREG3.
inline void rsqrt_row() {
    TTI_SFPMOV(0, L0, L1, 0);
    TTI_SFPSHFT(imm12(-1), 0, L1, SHFT_IMM);      // bits(x) >> 1
    load_f32<L2, 0x5F3759DFu>();
    TTI_SFPIADD(0, L2, L1, IADD_C_MINUS_DEST | IADD_NO_CC);  // L1 = y0 = 0x5F3759DF - (bits(x) >> 1)
    TTI_SFPMULI(0x3F00, L0, 0);                   // L0 = h = x / 2
    TTI_SFPLOADI(L3, IMM_BF16, 0x3FC0);           // 1.5
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
        TTI_SFPMUL(L0, L1, ZERO, L2, 0);          // h y (not y^2 first: for x near 2^127, y^2 is subnormal)
        TTI_SFPMAD(L2, L1, L3, L2, NEG_A);        // 1.5 - (h y) y
        TTI_SFPMUL(L1, L2, ZERO, L1, 0);          // y <- y (1.5 - h y^2)
    }
    TTI_SFPEXEXP(0, L0, L2, EXEXP_RAW);
    TTI_SFPIADD(imm12(-255), L2, L2, IADD_IMM | IADD_NO_CC);  // L2 = 0 where h = +-inf or NaN
    cc_on_all();
    TTI_SFPSETCC(0, L2, 0, CC_ZERO);              // x = +inf (or NaN: repaired again below if negative)
    TTI_SFPMOV(0, ZERO, L1, 0);
    cc_on_all();
    TTI_SFPSETCC(0, L0, 0, CC_ZERO);              // x = +0
    TTI_SFPLOADI(L1, IMM_BF16, 0x7F80);           //   +inf
    cc_on_all();
    TTI_SFPSETCC(0, L0, 0, CC_NEG);               // sign bit set: x < 0 or -0
    TTI_SFPLOADI(L1, IMM_BF16, 0x7FC0);           //   NaN
    cc_off();
    TTI_SFPMOV(0, L1, L0, 0);
}

// ---- ReLU -------------------------------------------------------------------------------------------
// max(x, 0) with one SFPSWAP (the state encoder's and the action decoder's first layers).
// Clobbers LREG1.
inline void relu_row() {
    TTI_SFPLOADI(L1, IMM_BF16, 0);                 // 0.0
    TTI_SFPSWAP(0, L0, L1, SWAP_MINMAX);           // L0 = max(x, 0)
}

// ---- SiLU -------------------------------------------------------------------------------------------
// x sigmoid(x) = x * 1 / (1 + e^-x). For x -> -inf, e^-x overflows to +inf and its reciprocal to 0.
// Clobbers LREG1..LREG5.
inline void silu_row() {
    TTI_SFPMOV(0, L0, L5, 0);                     // L5 = x
    TTI_SFPMOV(0, L0, L0, MOV_NEG);               // -x
    exp_row();
    TTI_SFPADDI(0x3F80, L0, 0);                   // 1 + e^-x
    recip_row();
    TTI_SFPMUL(L5, L0, ZERO, L0, 0);
}

// ---- GELU, tanh form --------------------------------------------------------------------------------
// 0.5 x (1 + tanh(z)) with z = sqrt(2/pi) (x + 0.044715 x^3); since 0.5 (1 + tanh z) = sigmoid(2z),
// this is x / (1 + e^(-2z)): one exp, one reciprocal, no tanh.
// Clobbers LREG1..LREG5.
inline void gelu_tanh_row() {
    TTI_SFPMOV(0, L0, L5, 0);                     // L5 = x
    TTI_SFPMUL(L0, L0, ZERO, L1, 0);              // x^2
    load_f32<L2, bits(0.044715f)>();
    TTI_SFPMAD(L1, L2, ONE, L1, 0);               // 1 + 0.044715 x^2
    TTI_SFPMUL(L0, L1, ZERO, L1, 0);              // x + 0.044715 x^3
    load_f32<L2, bits(-1.5957691216057308f)>();   // -2 sqrt(2/pi)
    TTI_SFPMUL(L1, L2, ZERO, L0, 0);              // -2z
    exp_row();
    TTI_SFPADDI(0x3F80, L0, 0);                   // 1 + e^(-2z)
    recip_row();
    TTI_SFPMUL(L5, L0, ZERO, L0, 0);
}

// ---- GELU, exact (erf) form -------------------------------------------------------------------------
// x Phi(x) = x erfc(-x / sqrt 2) / 2 (the Eagle projector's `nn.GELU()`). erfc(z) for z = |x| / sqrt 2 by the
// Chebyshev fit erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), P of degree 9 (fractional error < 1.2e-7 for
// every z >= 0, so the far negative tail keeps its relative accuracy); Phi = erfc(z)/2 where x < 0 and
// 1 - erfc(z)/2 elsewhere (no cancellation: erfc(z) <= 1 there). exp's clamp at -87.5 ends the tail at 0.
// Clobbers LREG1..LREG6.
inline void gelu_erf_row() {
    TTI_SFPMOV(0, L0, L5, 0);                     // L5 = x
    load_f32<L1, bits(0.70710678118654752f)>();   // 1 / sqrt 2
    TTI_SFPMUL(L0, L1, ZERO, L0, 0);              // x / sqrt 2
    TTI_SFPMOV(0, L0, L1, MOV_NEG);
    TTI_SFPSWAP(0, L0, L1, SWAP_MINMAX);          // L0 = z = max(x, -x) / sqrt 2
    TTI_SFPMOV(0, L0, L6, 0);                     // L6 = z
    TTI_SFPLOADI(L2, IMM_BF16, 0x3F00);           // 1/2
    TTI_SFPMAD(L0, L2, ONE, L0, 0);               // 1 + z/2
    recip_row();                                  // L0 = t
    TTI_SFPMOV(0, L0, L4, 0);                     // L4 = t
    // P(t) by Horner from the highest coefficient.
    load_f32<L0, bits(0.17087277f)>();
    load_f32<L1, bits(-0.82215223f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(1.48851587f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(-1.13520398f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(0.27886807f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(-0.18628806f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(0.09678418f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(0.37409196f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(1.00002368f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);
    load_f32<L1, bits(-1.26551223f)>();
    TTI_SFPMAD(L0, L4, L1, L0, 0);                // P(t)
    TTI_SFPMAD(L6, L6, L0, L0, NEG_A);            // -z^2 + P(t), one rounding
    TTI_SFPMOV(0, L4, L6, 0);                     // L6 = t (exp clobbers L1..L4)
    exp_row();
    TTI_SFPMUL(L6, L0, ZERO, L0, 0);              // erfc(z)
    TTI_SFPMULI(0x3F00, L0, 0);                   // erfc(z) / 2 = Phi(-|x|)
    cc_on_all();
    TTI_SFPSETCC(0, L5, 0, CC_NONNEG);            // x >= 0 (sign bit clear)
    TTI_SFPMAD(L0, ONE, ONE, L0, NEG_A);          //   Phi(|x|) = 1 - erfc(z) / 2
    cc_off();
    TTI_SFPMUL(L5, L0, ZERO, L0, 0);
}

// ---- round to bf16 -----------------------------------------------------------------------------------
// x rounded to the nearest bf16 (ties to even), kept as fp32: what a pack to bf16 and an unpack back
// would give, without leaving DST (the emulator packs a matmul's output to bf16 before its GELU).
// bits + 0x7FFF + (bit 16 of bits), low half cleared; finite x only (NaN and inf are not special-cased).
// Clobbers LREG1..LREG2.
inline void round_bf16_row() {
    TTI_SFPMOV(0, L0, L1, 0);
    TTI_SFPSHFT(imm12(-16), 0, L1, SHFT_IMM);     // bits >> 16
    TTI_SFPLOADI(L2, IMM_BF16, 0);                 // L2 = 0x00000000 ...
    TTI_SFPLOADI(L2, IMM_LO, 1);                   //      ... | 1
    TTI_SFPAND(0, L2, L1, 0);                      // L1 = (bits >> 16) & 1
    TTI_SFPLOADI(L2, IMM_LO, 0x7FFF);              // L2 = 0x00007FFF
    TTI_SFPIADD(0, L2, L1, IADD_NO_CC);            // L1 = 0x7FFF + lsb
    TTI_SFPIADD(0, L1, L0, IADD_NO_CC);            // L0 = bits + 0x7FFF + lsb
    TTI_SFPLOADI(L2, IMM_BF16, 0xFFFF);            // L2 = 0xFFFF0000
    TTI_SFPAND(0, L2, L0, 0);
}

// ---- bias, bf16 rounding and an activation ------------------------------------------------------------
// DST tile 0 holds a matmul's fp32 sums, DST tile 1 the bias replicated over the rows: x + bias, rounded
// to bf16 (the matmul's packed output), then ACT (gelu_tanh_row, or nothing). Exact fp32 adds: both tiles
// are unpacked straight to the fp32 DST.
constexpr uint32_t DST_NEXT_TILE = 64;  // SFPU rows from one DST tile to the next (a 32x32 tile: 64 x 16)
template <void (*ACT)()>
inline void bias_round_act_row() {
    TTI_SFPLOAD(L1, 0, ADDR_MOD_7, DST_NEXT_TILE);
    TTI_SFPMAD(L0, ONE, L1, L0, 0);                // x + bias
    round_bf16_row();
    ACT();
}
inline void no_act() {}

// ---- residual add -------------------------------------------------------------------------------------
// DST tile 0 holds the fp32 residual stream, DST tile 1 a sub-layer's output: their fp32 sum.
inline void add_next_tile_row() {
    TTI_SFPLOAD(L1, 0, ADDR_MOD_7, DST_NEXT_TILE);
    TTI_SFPMAD(L0, ONE, L1, L0, 0);
}

// ---- gated product ------------------------------------------------------------------------------------
// DST tile 0 holds a matmul's output, DST tile 1 the gate (SwiGLU's SiLU(x·W_gate)): their fp32 product.
inline void mul_next_tile_row() {
    TTI_SFPLOAD(L1, 0, ADDR_MOD_7, DST_NEXT_TILE);
    TTI_SFPMAD(L0, L1, ZERO, L0, 0);
}

// ---- the tile driver --------------------------------------------------------------------------------
// Runs ROW over the 32x32 tile at DST index `dst`: 4 faces of 16x16, each 8 loads of 4 rows x 8 columns
// (even columns, then odd: the SFPU's DST row counter steps by 2).
// `_llk_math_eltwise_unary_sfpu_init_once_()` must have run in this kernel (ADDR_MOD_7: no auto-increment).
template <void (*ROW)()>
inline void tile(uint32_t dst) {
    _llk_math_eltwise_sfpu_start_(dst);
    for (int face = 0; face < 4; ++face) {
        for (int r = 0; r < 8; ++r) {
            TTI_SFPLOAD(L0, 0, ADDR_MOD_7, 0);    // instr_mod0 0: the format DST holds (fp32 or bf16)
            ROW();
            TTI_SFPSTORE(L0, 0, ADDR_MOD_7, 0);
            TTI_INCRWC(0, 2, 0, 0);
        }
        _llk_math_eltwise_sfpu_inc_dst_face_addr_();
    }
    _llk_math_eltwise_sfpu_done_();
}

}  // namespace gr00t_sfpu
