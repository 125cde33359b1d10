// SPDX-License-Identifier: Apache-2.0
// Row softmax with max subtraction, on whole tile rows of fp32 scores s [rows, n] (Wt = n / 32 tiles;
// columns past the real keys hold a large negative number, so they weigh 0): p = exp(s - max) / sum,
// packed to bf16 (what P.V takes).
//
// 1. Row max on the FPU: reduce_tile (MAX, REDUCE_ROW, scaler 1.0) over the row's tiles.
// 2. s - max (column broadcast on the FPU), then exp on the SFPU (our library), tile by tile.
// 3. Row sum of the exponentials by reduce_tile (SUM, REDUCE_ROW), its reciprocal on the SFPU.
// 4. exp * (1 / sum) (column broadcast), packed to bf16.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB. Runtime args: tasks (reader_rows.cpp's; the scaler
// comes again with each); per task Wt and its tile rows on this core (16-bit halves, low first).
// CBs (fp32 unless said): 0 s (Wt), 1 the reduce scaler (1 tile of ones), 4 exp (Wt), 6 max (1),
// 7 1/sum (1), 16 p (bf16).
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/compute/bcast.h"
#include "api/compute/reduce.h"
#include "api/compute/reconfig_data_format.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@
#endif

void kernel_main() {
    constexpr uint32_t cb_s = 0, cb_scaler = 1, cb_e = 4, cb_max = 6, cb_rsum = 7, cb_p = 16;
    DataflowBuffer dfb_s(cb_s), dfb_scaler(cb_scaler), dfb_e(cb_e), dfb_max(cb_max), dfb_rsum(cb_rsum),
        dfb_p(cb_p);

    compute_kernel_hw_startup(cb_s, cb_scaler, cb_e);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t wt_count = get_arg_val<uint32_t>(1 + task) & 0xffff;
        const uint32_t row_tiles = get_arg_val<uint32_t>(1 + task) >> 16;
        dfb_scaler.wait_front(1);
        for (uint32_t r = 0; r < row_tiles; ++r) {
            dfb_s.wait_front(wt_count);
            // 1. row max
            reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_s, cb_scaler, cb_max);
            tile_regs_acquire();
            for (uint32_t wt = 0; wt < wt_count; ++wt) {
                reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(cb_s, cb_scaler, wt, 0, 0);
            }
            tile_regs_commit();
            dfb_max.reserve_back(1);
            tile_regs_wait();
            pack_tile(0, cb_max);
            tile_regs_release();
            dfb_max.push_back(1);
            reduce_uninit();
            dfb_max.wait_front(1);
            // 2. exp(s - max)
            sub_bcast_cols_init(cb_s, cb_max);
            for (uint32_t wt = 0; wt < wt_count; ++wt) {
                tile_regs_acquire();
                sub_tiles_bcast_cols(cb_s, cb_max, wt, 0, 0);
                MATH((gr00t_sfpu::tile<gr00t_sfpu::exp_row>(0)));
                tile_regs_commit();
                dfb_e.reserve_back(1);
                tile_regs_wait();
                pack_tile(0, cb_e);
                tile_regs_release();
                dfb_e.push_back(1);
            }
            dfb_s.pop_front(wt_count);
            dfb_max.pop_front(1);
            dfb_e.wait_front(wt_count);
            // 3. 1 / row sum
            reconfig_data_format(cb_scaler, cb_e);
            reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_e, cb_scaler, cb_rsum);
            tile_regs_acquire();
            for (uint32_t wt = 0; wt < wt_count; ++wt) {
                reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(cb_e, cb_scaler, wt, 0, 0);
            }
            MATH((gr00t_sfpu::tile<gr00t_sfpu::recip_row>(0)));
            tile_regs_commit();
            dfb_rsum.reserve_back(1);
            tile_regs_wait();
            pack_tile(0, cb_rsum);
            tile_regs_release();
            dfb_rsum.push_back(1);
            reduce_uninit();
            dfb_rsum.wait_front(1);
            // 4. p = exp * (1 / sum), bf16
            mul_bcast_cols_init(cb_e, cb_rsum);
            pack_reconfig_data_format(cb_p);
            for (uint32_t wt = 0; wt < wt_count; ++wt) {
                tile_regs_acquire();
                mul_tiles_bcast_cols(cb_e, cb_rsum, wt, 0, 0);
                tile_regs_commit();
                dfb_p.reserve_back(1);
                tile_regs_wait();
                pack_tile(0, cb_p);
                tile_regs_release();
                dfb_p.push_back(1);
            }
            pack_reconfig_data_format(cb_e);
            dfb_e.pop_front(wt_count);
            dfb_rsum.pop_front(1);
        }
        dfb_scaler.pop_front(1);
    }
}
