// SPDX-License-Identifier: Apache-2.0
// The compute side of a row program whose reader builds the output itself (gather_rows.cpp: the LLM's input
// rows): each tile row's Wt fp32 tiles of CB 0 handed on unchanged to CB 16 (fp32), tile by tile through
// DST. The host lists CB 0 as unpack-to-dest (gather.rs), so the values go straight to the fp32 DST and
// never pass the FPU's 19-bit source registers: the copy is bit-exact.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h (whose pass this is) at
// GR00T_COMPUTE_PIECES. Runtime args (the worker's row program): tasks; per task Wt and its tile rows on this
// core (16-bit halves, low first).
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@
#endif
//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS pass_rows.cpp@@

void kernel_main() {
    DataflowBuffer dfb_x(cb_x), dfb_y(cb_y);
    compute_kernel_hw_startup(cb_x, cb_y);
    copy_init(cb_x);
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t wt_count = get_arg_val<uint32_t>(1 + task) & 0xffff;
        const uint32_t row_tiles = get_arg_val<uint32_t>(1 + task) >> 16;
        for (uint32_t r = 0; r < row_tiles; ++r) {
            dfb_x.wait_front(wt_count);
            gr00t_compute::pass(wt_count, dfb_y, cb_y, [&](uint32_t t) { copy_tile(cb_x, t, 0); });
            dfb_x.pop_front(wt_count);
        }
    }
}
