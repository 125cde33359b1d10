// SPDX-License-Identifier: Apache-2.0
// Row softmax with max subtraction, on whole tile rows of fp32 scores s [rows, n] (Wt = n / 32 tiles;
// columns past the real keys hold a large negative number, so they weigh 0): p = exp(s - max) / sum,
// packed to bf16 (what P.V takes).
//
// 1. Row max on the FPU: reduce_tile (MAX, REDUCE_ROW, scaler 1.0) over the row's tiles.
// 2. s - max (column broadcast on the FPU), then exp on the SFPU (our library), tile by tile.
// 3. Row sum of the exponentials by reduce_tile (SUM, REDUCE_ROW), its reciprocal on the SFPU.
// 4. exp * (1 / sum) (column broadcast), packed to bf16.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h (its row_softmax: these four
// steps) at GR00T_COMPUTE_PIECES. Runtime args: tasks (reader_rows.cpp's; the scaler comes again with
// each); per task Wt and its tile rows on this core (16-bit halves, low first).
// CBs (fp32 unless said): 0 s (Wt), 1 the reduce scaler (1 tile of ones), 4 exp (Wt), 6 max (1),
// 7 1/sum (1), 16 p (bf16).
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
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
//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS softmax_rows.cpp@@

void kernel_main() {
    DataflowBuffer dfb_s(cb_s), dfb_scaler(cb_scaler), dfb_e(cb_e), dfb_max(cb_max), dfb_rsum(cb_rsum),
        dfb_p(cb_p);

    compute_kernel_hw_startup(cb_s, cb_scaler, cb_e);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t wt_count = get_arg_val<uint32_t>(1 + task) & 0xffff;
        const uint32_t row_tiles = get_arg_val<uint32_t>(1 + task) >> 16;
        dfb_scaler.wait_front(1);
        for (uint32_t r = 0; r < row_tiles; ++r) {
            gr00t_compute::row_softmax(wt_count, {cb_s, dfb_s}, cb_scaler, {cb_e, dfb_e}, {cb_max, dfb_max},
                                       {cb_rsum, dfb_rsum}, {cb_p, dfb_p});
            // the next row's statistics are packed fp32
            pack_reconfig_data_format(cb_e);
        }
        dfb_scaler.pop_front(1);
    }
}
