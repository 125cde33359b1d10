// SPDX-License-Identifier: Apache-2.0
// LayerNorm (or, with GR00T_NORM_RMS, RMSNorm) with its own per-column gamma and beta, streaming: for each
// 32-row tile row of the fp32 x [rows, D] (Wt = D / 32 tiles), y = (x - mean) * rstd * g + b (RMS:
// y = x * rstd * g, rstd over E[x^2]), packed to bf16, with only GR00T_NORM_CHUNK tiles of the row in L1 at
// a time, so any width fits a core (the whole-row layernorm_rows.cpp needs ~6 Wt tiles: 3.6 MB at D = 4608).
// The reader (reader_rows_stream.cpp) sends each row twice, in chunks of up to GR00T_NORM_CHUNK tiles:
//
// 0. (LayerNorm) The row's shift c = bf16(mean of its first tile's 32 columns), packed as a column tile:
//    the statistics are of d = x - c, so E[d^2] - E[d]^2 does not cancel when the mean is large against
//    the spread (the FPU's source registers keep 10 mantissa bits: with x near 20 and unshifted, that
//    form lost a tenth of the variance).
// 1. Statistics pass (x only): per chunk, d = x - c (column broadcast) into w1 (RMS: d = x, no shift),
//    d^2 on the FPU (mul_tiles) into w0, then reduce_tile (REDUCE_ROW, scaler 1.0: MVMUL, accumulating in
//    the fp32 DST) of the chunk's d into DST 0 and of d^2 into DST 1, on top of the running sums of the
//    chunks before, which come back from CBs sum / sumsq (fp32, unpacked straight to DST: the host lists
//    them as unpack-to-dest, so the sums never pass the FPU's 19-bit source registers). After the last
//    chunk the SFPU (our library) turns them into m = E[d] = s / D and
//    rstd = 1 / sqrt(max(s2 / D - m^2, 0) + eps) (RMS: 1 / sqrt(s2 / D + eps)), packed as column tiles.
// 2. Output pass (x again, with the chunk's g and b tiles): (x - c) - m (column broadcasts), * rstd
//    (column), * g (row broadcast), + b (row), the last packed to the bf16 output.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h at GR00T_COMPUTE_PIECES, and
// defines GR00T_LN_INV_D (1/D), GR00T_LN_EPS (fp32 literals) and GR00T_NORM_CHUNK (as the reader's).
// Runtime args: tasks; per task Wt and its tile rows on this core (16-bit halves, low first).
// CBs (fp32 unless said): 0 x (2 chunks), 1 the reduce scaler (1 tile of ones), 2 g and 3 b (2 chunks each;
// RMS: no b), 4 and 5 work (1 chunk each; RMS: no 5), 6 m (1; RMS: none), 7 rstd (1), 8 sum and 9 sumsq
// (2 each, unpack-to-dest; RMS: no sum), 10 the shift c (1; RMS: none), 16 y (bf16).
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/bcast.h"
#include "api/compute/reduce.h"
#include "api/compute/reconfig_data_format.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@

namespace gr00t_sfpu {
#ifdef GR00T_NORM_RMS
// LREG0 holds the row sums of squares (DST 1): rstd = 1 / sqrt(s2 / D + eps).
inline void rms_stats_row() {
    load_f32<L1, bits(GR00T_LN_INV_D)>();
    load_f32<L2, bits(GR00T_LN_EPS)>();
    TTI_SFPMAD(L0, L1, L2, L0, 0);
    rsqrt_row();
}
#else
// LREG0 holds the row sums of a row's first tile: the row's shift c = bf16(s / 32), exact in the FPU's
// 19-bit source registers (so x - c is the same on every pass, and c needs no correction).
inline void shift_row() {
    TTI_SFPLOADI(L1, IMM_BF16, 0x3D00);            // 1/32
    TTI_SFPMUL(L0, L1, ZERO, L0, 0);
    round_bf16_row();
}
// DST 0 holds row sums s, DST 1 sums of squares s2 (only column 0 matters; every lane is computed):
// DST 0 <- mean = s / D, DST 1 <- rstd = 1 / sqrt(max(s2 / D - mean^2, 0) + eps). The tile driver stores
// LREG0 back to DST 0 after each row: LREG0 ends holding the mean.
inline void norm_stats_row() {
    TTI_SFPLOAD(L5, 0, ADDR_MOD_7, DST_NEXT_TILE);     // s2
    load_f32<L1, bits(GR00T_LN_INV_D)>();
    TTI_SFPMUL(L0, L1, ZERO, L0, 0);               // mean
    TTI_SFPMUL(L5, L1, ZERO, L5, 0);               // E[x^2]
    TTI_SFPMAD(L0, L0, L5, L5, NEG_A);             // var = E[x^2] - mean^2
    TTI_SFPMOV(0, ZERO, L1, 0);
    TTI_SFPSWAP(0, L5, L1, SWAP_MINMAX);           // var = max(var, 0): rounding can make it negative
    load_f32<L1, bits(GR00T_LN_EPS)>();
    TTI_SFPMAD(L5, ONE, L1, L5, 0);                // var + eps
    TTI_SFPSTORE(L0, 0, ADDR_MOD_7, 0);            // mean to DST 0
    TTI_SFPMOV(0, L5, L0, 0);
    rsqrt_row();
    TTI_SFPSTORE(L0, 0, ADDR_MOD_7, DST_NEXT_TILE);    // rstd to DST 1
    TTI_SFPLOAD(L0, 0, ADDR_MOD_7, 0);             // the mean again, for the driver's store
}
#endif
}  // namespace gr00t_sfpu
#endif
//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS norm_stream.cpp@@

namespace {
constexpr uint32_t CHUNK = GR00T_NORM_CHUNK;

// Every push and pop of a chunked CB (x, g, b, w0, w1) is a whole chunk, a row's last chunk padded with
// pages nobody reads (the reader pads x, g and b): with pages a multiple of the chunk, a chunk's tiles never
// straddle the CB's wrap, which the compute API's tile indices (from the read pointer) cannot follow.
inline void fill_chunk(DataflowBuffer& dfb, uint32_t n) {
    if (n < CHUNK) {
        dfb.reserve_back(CHUNK - n);
        dfb.push_back(CHUNK - n);
    }
}
inline void pop_chunk(DataflowBuffer& dfb) {
    dfb.wait_front(CHUNK);
    dfb.pop_front(CHUNK);
}

// The statistics pass over one tile row of `wt_count` tiles: (LayerNorm) the shift c first; then d, d^2 and
// the row reduces chunk by chunk, the running sums kept in CBs sum / sumsq between chunks; m (LayerNorm)
// and rstd packed at the end.
inline void statistics(uint32_t wt_count) {
    using gr00t_compute::pass;
    DataflowBuffer dfb_x(cb_x), dfb_w0(cb_w0), dfb_rstd(cb_rstd), dfb_sumsq(cb_sumsq);
#ifndef GR00T_NORM_RMS
    DataflowBuffer dfb_sum(cb_sum), dfb_mean(cb_mean), dfb_w1(cb_w1), dfb_shift(cb_shift);
    // the shift, from the row's first tile
    dfb_x.wait_front(1);
    reconfig_data_format(cb_scaler, cb_x);
    reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_scaler, cb_shift);
    tile_regs_acquire();
    reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_scaler, 0, 0, 0);
    MATH((gr00t_sfpu::tile<gr00t_sfpu::shift_row>(0)));
    gr00t_compute::pack_dst0(dfb_shift, cb_shift);
    reduce_uninit();
    dfb_shift.wait_front(1);
    constexpr uint32_t cb_d = cb_w1;  // d = x - c
#else
    constexpr uint32_t cb_d = cb_x;  // d = x
#endif
    for (uint32_t t0 = 0; t0 < wt_count; t0 += CHUNK) {
        const uint32_t n = wt_count - t0 < CHUNK ? wt_count - t0 : CHUNK;
        const bool last = t0 + n == wt_count;
        dfb_x.wait_front(n);
#ifndef GR00T_NORM_RMS
        // x - c -> w1
        reconfig_data_format(cb_x, cb_shift);
        sub_bcast_cols_init(cb_x, cb_shift);
        pass(n, dfb_w1, cb_w1, [&](uint32_t t) { sub_tiles_bcast_cols(cb_x, cb_shift, t, 0, 0); });
        fill_chunk(dfb_w1, n);
        pop_chunk(dfb_x);
        dfb_w1.wait_front(n);
#endif
        // d^2 -> w0
        reconfig_data_format(cb_d, cb_d);
        mul_init(cb_d, cb_d, false);
        pass(n, dfb_w0, cb_w0, [&](uint32_t t) { mul_tiles(cb_d, cb_d, t, t, 0); });
        fill_chunk(dfb_w0, n);
        dfb_w0.wait_front(n);
        tile_regs_acquire();
        if (t0 > 0) {
            // The sums so far, straight to the fp32 DST (unpack-to-dest CBs).
#ifndef GR00T_NORM_RMS
            dfb_sum.wait_front(1);
            copy_init(cb_sum);
            copy_tile(cb_sum, 0, 0);
            dfb_sum.pop_front(1);
#endif
            dfb_sumsq.wait_front(1);
            copy_init(cb_sumsq);
            copy_tile(cb_sumsq, 0, 1);
            dfb_sumsq.pop_front(1);
        }
        reconfig_data_format(cb_scaler, cb_d);
        reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_d, cb_scaler, cb_rstd);
#ifndef GR00T_NORM_RMS
        gr00t_compute::reduce_row_tiles<PoolType::SUM>(cb_d, cb_scaler, n, 0);
#endif
        gr00t_compute::reduce_row_tiles<PoolType::SUM>(cb_w0, cb_scaler, n, 1);
        if (last) {
#ifdef GR00T_NORM_RMS
            MATH((gr00t_sfpu::tile<gr00t_sfpu::rms_stats_row>(1)));
#else
            MATH((gr00t_sfpu::tile<gr00t_sfpu::norm_stats_row>(0)));
#endif
        }
        tile_regs_commit();
        // DST 0 (LayerNorm only) to the sums or the mean, DST 1 to the sums of squares or rstd.
#ifndef GR00T_NORM_RMS
        const uint32_t out0 = last ? cb_mean : cb_sum;
        DataflowBuffer& dfb0 = last ? dfb_mean : dfb_sum;
        dfb0.reserve_back(1);
#endif
        const uint32_t out1 = last ? cb_rstd : cb_sumsq;
        DataflowBuffer& dfb1 = last ? dfb_rstd : dfb_sumsq;
        dfb1.reserve_back(1);
        tile_regs_wait();
#ifndef GR00T_NORM_RMS
        pack_tile(0, out0);
#endif
        pack_tile(1, out1);
        tile_regs_release();
#ifndef GR00T_NORM_RMS
        dfb0.push_back(1);
#endif
        dfb1.push_back(1);
        reduce_uninit();
        pop_chunk(dfb_w0);
#ifdef GR00T_NORM_RMS
        pop_chunk(dfb_x);
#else
        pop_chunk(dfb_w1);
#endif
    }
}

// The output pass over the tile row (x, g and b chunk by chunk), with its mean and rstd.
inline void normalise(uint32_t wt_count) {
    using gr00t_compute::pass;
    DataflowBuffer dfb_x(cb_x), dfb_g(cb_g), dfb_w0(cb_w0), dfb_rstd(cb_rstd), dfb_y(cb_y);
#ifndef GR00T_NORM_RMS
    DataflowBuffer dfb_b(cb_b), dfb_w1(cb_w1), dfb_mean(cb_mean), dfb_shift(cb_shift);
    dfb_mean.wait_front(1);
#endif
    dfb_rstd.wait_front(1);
    for (uint32_t t0 = 0; t0 < wt_count; t0 += CHUNK) {
        const uint32_t n = wt_count - t0 < CHUNK ? wt_count - t0 : CHUNK;
        dfb_x.wait_front(n);
        dfb_g.wait_front(n);
#ifdef GR00T_NORM_RMS
        // x * rstd -> w0; * g -> y (bf16)
        reconfig_data_format(cb_x, cb_rstd);
        mul_bcast_cols_init(cb_x, cb_rstd);
        pass(n, dfb_w0, cb_w0, [&](uint32_t t) { mul_tiles_bcast_cols(cb_x, cb_rstd, t, 0, 0); });
        fill_chunk(dfb_w0, n);
        pop_chunk(dfb_x);
        dfb_w0.wait_front(n);
        mul_bcast_rows_init(cb_w0, cb_g);
        pack_reconfig_data_format(cb_y);
        pass(n, dfb_y, cb_y, [&](uint32_t t) { mul_tiles_bcast_rows(cb_w0, cb_g, t, t, 0); });
        pack_reconfig_data_format(cb_w0);
        pop_chunk(dfb_w0);
        pop_chunk(dfb_g);
#else
        dfb_b.wait_front(n);
        // x - c -> w1; - m -> w0; * rstd -> w1; * g -> w0; + b -> y (bf16)
        reconfig_data_format(cb_x, cb_shift);
        sub_bcast_cols_init(cb_x, cb_shift);
        pass(n, dfb_w1, cb_w1, [&](uint32_t t) { sub_tiles_bcast_cols(cb_x, cb_shift, t, 0, 0); });
        fill_chunk(dfb_w1, n);
        pop_chunk(dfb_x);
        dfb_w1.wait_front(n);
        sub_bcast_cols_init(cb_w1, cb_mean);
        pass(n, dfb_w0, cb_w0, [&](uint32_t t) { sub_tiles_bcast_cols(cb_w1, cb_mean, t, 0, 0); });
        fill_chunk(dfb_w0, n);
        pop_chunk(dfb_w1);
        dfb_w0.wait_front(n);
        mul_bcast_cols_init(cb_w0, cb_rstd);
        pass(n, dfb_w1, cb_w1, [&](uint32_t t) { mul_tiles_bcast_cols(cb_w0, cb_rstd, t, 0, 0); });
        fill_chunk(dfb_w1, n);
        pop_chunk(dfb_w0);
        dfb_w1.wait_front(n);
        mul_bcast_rows_init(cb_w1, cb_g);
        pass(n, dfb_w0, cb_w0, [&](uint32_t t) { mul_tiles_bcast_rows(cb_w1, cb_g, t, t, 0); });
        fill_chunk(dfb_w0, n);
        pop_chunk(dfb_w1);
        pop_chunk(dfb_g);
        dfb_w0.wait_front(n);
        add_bcast_rows_init(cb_w0, cb_b);
        pack_reconfig_data_format(cb_y);
        pass(n, dfb_y, cb_y, [&](uint32_t t) { add_tiles_bcast_rows(cb_w0, cb_b, t, t, 0); });
        pack_reconfig_data_format(cb_w0);
        pop_chunk(dfb_w0);
        pop_chunk(dfb_b);
#endif
    }
#ifndef GR00T_NORM_RMS
    dfb_mean.pop_front(1);
    dfb_shift.pop_front(1);
#endif
    dfb_rstd.pop_front(1);
}
}  // namespace

void kernel_main() {
    DataflowBuffer dfb_scaler(cb_scaler);
    compute_kernel_hw_startup(cb_x, cb_x, cb_w0);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t wt_count = get_arg_val<uint32_t>(1 + task) & 0xffff;
        const uint32_t row_tiles = get_arg_val<uint32_t>(1 + task) >> 16;
        dfb_scaler.wait_front(1);
        for (uint32_t r = 0; r < row_tiles; ++r) {
            statistics(wt_count);
            normalise(wt_count);
        }
        dfb_scaler.pop_front(1);
    }
}
