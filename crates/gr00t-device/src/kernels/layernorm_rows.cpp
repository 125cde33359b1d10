// SPDX-License-Identifier: Apache-2.0
// LayerNorm (no affine) with the AdaLN modulation, on whole tile rows: for each 32-row tile row of the
// fp32 residual stream x [rows, D] (Wt = D / 32 tiles), y = (x - mean) * rstd * g + b, packed to bf16,
// where g = 1 + scale and b = shift are per-column vectors (row 0 of their tiles; g = 1, b = 0 for the
// plain LayerNorm before the feed-forward).
//
// 1. Sums on the FPU: x^2 tile by tile (mul_tiles), then reduce_tile (REDUCE_ROW, scaler 1.0) of the
//    Wt tiles of x into DST 0 and of x^2 into DST 1: column 0 holds each row's sum and sum of squares
//    (fp32 DST, accumulated across the row's tiles).
// 2. Statistics on the SFPU (our library): mean = s / D, var = max(s2 / D - mean^2, 0),
//    rstd = rsqrt(var + eps), in place in DST 0 / DST 1; packed as the mean and rstd column tiles.
// 3. Four broadcast passes on the FPU over the row's tiles: x - mean (column broadcast), * rstd
//    (column), * g (row broadcast), + b (row), the last packed to the bf16 output.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h (pass, the row reduce) at
// GR00T_COMPUTE_PIECES, and defines GR00T_LN_INV_D (1/D) and GR00T_LN_EPS as fp32 literals. With
// GR00T_LN_ONE_PLUS_G defined, g is the AdaLN scale itself (as the device's AdaLN matmul leaves it) and the
// modulation is (h * scale + h) + shift: one more FPU pass, through CB 8.
// Runtime args: tasks (one per LayerNorm of a chain this core takes part in: reader_rows.cpp sends the
// scaler, g and b again with each); per task Wt and its tile rows on this core (16-bit halves, low first).
// CBs (fp32 unless said): 0 x (Wt), 1 the reduce scaler (1 tile of ones), 2 g (Wt), 3 b (Wt),
// 4 and 5 work (Wt each), 6 mean (1), 7 rstd (1), 16 y (bf16).
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
// DST 0 holds row sums s, DST 1 sums of squares s2 (only column 0 matters; every lane is computed):
// DST 0 <- mean = s / D, DST 1 <- rstd = 1 / sqrt(max(s2 / D - mean^2, 0) + eps).
inline void ln_stats_row() {
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
}
// The tile driver stores LREG0 back to DST 0 after each row: keep the mean there.
inline void ln_stats_keep_mean_row() {
    ln_stats_row();
    TTI_SFPLOAD(L0, 0, ADDR_MOD_7, 0);
}
}  // namespace gr00t_sfpu
#endif
//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS layernorm_rows.cpp@@

void kernel_main() {
    using gr00t_compute::pass;
    DataflowBuffer dfb_x(cb_x), dfb_scaler(cb_scaler), dfb_g(cb_g), dfb_b(cb_b);
    DataflowBuffer dfb_w0(cb_w0), dfb_w1(cb_w1), dfb_mean(cb_mean), dfb_rstd(cb_rstd), dfb_y(cb_y);

    compute_kernel_hw_startup(cb_x, cb_x, cb_w0);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t wt_count = get_arg_val<uint32_t>(1 + task) & 0xffff;
        const uint32_t row_tiles = get_arg_val<uint32_t>(1 + task) >> 16;
        dfb_scaler.wait_front(1);
        dfb_g.wait_front(wt_count);
        dfb_b.wait_front(wt_count);
        for (uint32_t r = 0; r < row_tiles; ++r) {
            dfb_x.wait_front(wt_count);
            // x^2 -> w0
            mul_init(cb_x, cb_x, false);
            pass(wt_count, dfb_w0, cb_w0, [&](uint32_t wt) { mul_tiles(cb_x, cb_x, wt, wt, 0); });
            dfb_w0.wait_front(wt_count);
            // row sums of x (DST 0) and x^2 (DST 1), then the statistics on the SFPU
            reconfig_data_format(cb_scaler, cb_x);
            reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_x, cb_scaler, cb_mean);
            tile_regs_acquire();
            gr00t_compute::reduce_row_tiles<PoolType::SUM>(cb_x, cb_scaler, wt_count, 0);
            gr00t_compute::reduce_row_tiles<PoolType::SUM>(cb_w0, cb_scaler, wt_count, 1);
            MATH((gr00t_sfpu::tile<gr00t_sfpu::ln_stats_keep_mean_row>(0)));
            tile_regs_commit();
            dfb_mean.reserve_back(1);
            dfb_rstd.reserve_back(1);
            tile_regs_wait();
            pack_tile(0, cb_mean);
            pack_tile(1, cb_rstd);
            tile_regs_release();
            dfb_mean.push_back(1);
            dfb_rstd.push_back(1);
            reduce_uninit();
            dfb_w0.pop_front(wt_count);
            dfb_mean.wait_front(1);
            dfb_rstd.wait_front(1);
            // x - mean -> w0; * rstd -> w1; * g -> w0; + b -> y (bf16)
            sub_bcast_cols_init(cb_x, cb_mean);
            pass(wt_count, dfb_w0, cb_w0, [&](uint32_t wt) { sub_tiles_bcast_cols(cb_x, cb_mean, wt, 0, 0); });
            dfb_x.pop_front(wt_count);
            dfb_w0.wait_front(wt_count);
            mul_bcast_cols_init(cb_w0, cb_rstd);
            pass(wt_count, dfb_w1, cb_w1, [&](uint32_t wt) { mul_tiles_bcast_cols(cb_w0, cb_rstd, wt, 0, 0); });
            dfb_w0.pop_front(wt_count);
            dfb_w1.wait_front(wt_count);
            mul_bcast_rows_init(cb_w1, cb_g);
            pass(wt_count, dfb_w0, cb_w0, [&](uint32_t wt) { mul_tiles_bcast_rows(cb_w1, cb_g, wt, wt, 0); });
    #ifdef GR00T_LN_ONE_PLUS_G
            dfb_w0.wait_front(wt_count);
            DataflowBuffer dfb_w2(cb_w2);
            add_init(cb_w0, cb_w1, false);
            pass(wt_count, dfb_w2, cb_w2, [&](uint32_t wt) { add_tiles(cb_w0, cb_w1, wt, wt, 0); });
            dfb_w0.pop_front(wt_count);
            dfb_w1.pop_front(wt_count);
            constexpr uint32_t cb_h = cb_w2;
            DataflowBuffer& dfb_h = dfb_w2;
    #else
            dfb_w1.pop_front(wt_count);
            constexpr uint32_t cb_h = cb_w0;
            DataflowBuffer& dfb_h = dfb_w0;
    #endif
            dfb_h.wait_front(wt_count);
            add_bcast_rows_init(cb_h, cb_b);
            pack_reconfig_data_format(cb_y);
            pass(wt_count, dfb_y, cb_y, [&](uint32_t wt) { add_tiles_bcast_rows(cb_h, cb_b, wt, wt, 0); });
            pack_reconfig_data_format(cb_w0);
            dfb_h.pop_front(wt_count);
            dfb_mean.pop_front(1);
            dfb_rstd.pop_front(1);
        }
        dfb_scaler.pop_front(1);
        dfb_g.pop_front(wt_count);
        dfb_b.pop_front(wt_count);
    }
}
