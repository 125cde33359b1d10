// SPDX-License-Identifier: Apache-2.0
// The residual add on the device: x + o for whole tile rows of the fp32 residual stream x [rows, d]
// (Wt = d / 32 tiles) and a sub-layer's output o (its bf16 values), kept fp32 (the stream never leaves
// fp32). Both are unpacked straight to the fp32 DST and added on the SFPU: exact fp32, as the emulator.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB. Runtime args: Wt, tile rows on this core.
// CBs (fp32): 0 x (Wt), 1 the reader's scaler tile (unused), 2 o (Wt), 16 x + o.
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

void kernel_main() {
    const uint32_t wt_count = get_arg_val<uint32_t>(0);
    const uint32_t row_tiles = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb_x = 0, cb_scaler = 1, cb_o = 2, cb_y = 16;
    DataflowBuffer dfb_x(cb_x), dfb_scaler(cb_scaler), dfb_o(cb_o), dfb_y(cb_y);

    compute_kernel_hw_startup(cb_x, cb_y);
    copy_init(cb_x);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    dfb_scaler.wait_front(1);
    for (uint32_t r = 0; r < row_tiles; ++r) {
        dfb_x.wait_front(wt_count);
        dfb_o.wait_front(wt_count);
        for (uint32_t wt = 0; wt < wt_count; ++wt) {
            tile_regs_acquire();
            copy_tile(cb_x, wt, 0);
            copy_tile(cb_o, wt, 1);
            MATH((gr00t_sfpu::tile<gr00t_sfpu::add_next_tile_row>(0)));
            tile_regs_commit();
            dfb_y.reserve_back(1);
            tile_regs_wait();
            pack_tile(0, cb_y);
            tile_regs_release();
            dfb_y.push_back(1);
        }
        dfb_x.pop_front(wt_count);
        dfb_o.pop_front(wt_count);
    }
    dfb_scaler.pop_front(1);
}
