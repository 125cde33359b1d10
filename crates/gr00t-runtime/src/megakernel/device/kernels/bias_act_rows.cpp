// SPDX-License-Identifier: Apache-2.0
// The end of a matmul on the device: y = ACT(bf16(x + bias)) for whole tile rows of a matmul's fp32 sums
// x [rows, n] (Wt = n / 32 tiles), bias per column, packed to bf16. ACT is GR00T_ACT_ROW: the FF-up's
// GELU (gr00t_sfpu::gelu_tanh_row) or gr00t_sfpu::no_act. All on the SFPU in fp32: x and the bias tile
// (the bias replicated over its 32 rows) are unpacked straight to the fp32 DST (no 19-bit FPU operands),
// so this is the emulator's finish_matmul + gelu_tanh + pack, op for op.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and defines GR00T_ACT_ROW. Runtime args: Wt, tile rows
// on this core. CBs (fp32): 0 x (Wt), 1 the reader's scaler tile (unused), 2 bias (Wt), 3 unused (Wt);
// 16 y (bf16).
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@
namespace gr00t_sfpu {
inline void bias_act_row() { bias_round_act_row<GR00T_ACT_ROW>(); }
}  // namespace gr00t_sfpu
#endif

void kernel_main() {
    const uint32_t wt_count = get_arg_val<uint32_t>(0);
    const uint32_t row_tiles = get_arg_val<uint32_t>(1);
    constexpr uint32_t cb_x = 0, cb_scaler = 1, cb_bias = 2, cb_unused = 3, cb_y = 16;
    DataflowBuffer dfb_x(cb_x), dfb_scaler(cb_scaler), dfb_bias(cb_bias), dfb_unused(cb_unused), dfb_y(cb_y);

    compute_kernel_hw_startup(cb_x, cb_y);
    copy_init(cb_x);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    dfb_scaler.wait_front(1);
    dfb_bias.wait_front(wt_count);
    dfb_unused.wait_front(wt_count);
    for (uint32_t r = 0; r < row_tiles; ++r) {
        dfb_x.wait_front(wt_count);
        for (uint32_t wt = 0; wt < wt_count; ++wt) {
            tile_regs_acquire();
            copy_tile(cb_x, wt, 0);
            copy_tile(cb_bias, wt, 1);
            MATH((gr00t_sfpu::tile<gr00t_sfpu::bias_act_row>(0)));
            tile_regs_commit();
            dfb_y.reserve_back(1);
            tile_regs_wait();
            pack_tile(0, cb_y);
            tile_regs_release();
            dfb_y.push_back(1);
        }
        dfb_x.pop_front(wt_count);
    }
    dfb_scaler.pop_front(1);
    dfb_bias.pop_front(wt_count);
    dfb_unused.pop_front(wt_count);
}
