// SPDX-License-Identifier: Apache-2.0
// The end of a matmul on the device: y = ACT(bf16(x + bias)) for one unit of cw output tiles (one tile
// row, a run of columns) of a matmul's fp32 sums x, bias per column, packed to bf16 (or kept fp32 when the
// host gives CB 16 an fp32 format: the values are bf16 all the same, for the residual add that reads them
// next). x is the sum of the matmul's K pieces (the plan's split columns), added in piece order on the
// SFPU in fp32, as the plan's piece-0 core adds them. ACT is GR00T_ACT_ROW: the FF-up's GELU
// (gr00t_sfpu::gelu_tanh_row) or gr00t_sfpu::no_act. All on the SFPU in fp32: the partials and the bias
// tile (the bias replicated over its 32 rows) are unpacked straight to the fp32 DST (no 19-bit FPU
// operands), so this is the emulator's finish_matmul + gelu_tanh + pack, op for op.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h at GR00T_COMPUTE_PIECES, and
// defines GR00T_ACT_ROW. Read by reader_finish.cpp.
// With GR00T_FINISH_RESIDUAL defined (the output projection's and the FF-down's ends), the residual add
// rides here too: y = x_res + bf16(x + bias) in fp32 (CB 16 fp32), the fp32 stream's tile from CB 3, so the
// block's new stream comes out of the matmul's end and no program of its own adds it (the emulator's
// finish_matmul, then its fp32 add, op for op). With GR00T_FINISH_MUL defined as well (SwiGLU's up
// projection), the tile from CB 3 multiplies instead: y = bf16(x + bias) · gate, the gate being
// SiLU(x·W_gate) as the gate's own end wrote it (fp32 values of bf16).
// Runtime args: units; the most K pieces and the widest unit (16-bit halves, low first: every block of CBs 0
// and 2 is that size, reader_finish.cpp); per unit cw and its K pieces (1: no split), likewise in one word.
// CBs (fp32): 0 the partials of one output tile (pieces), 2 bias (cw), 3 the stream's tile
// (GR00T_FINISH_RESIDUAL); 16 y.
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
namespace gr00t_sfpu {
inline void bias_act_row() { bias_round_act_row<GR00T_ACT_ROW>(); }
}  // namespace gr00t_sfpu
#endif
//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS bias_act_rows.cpp@@

void kernel_main() {
    const uint32_t units = get_arg_val<uint32_t>(0);
    const uint32_t pmax = get_arg_val<uint32_t>(1) & 0xffff, cwmax = get_arg_val<uint32_t>(1) >> 16;
    DataflowBuffer dfb_x(cb_x), dfb_bias(cb_bias), dfb_y(cb_y);
#ifdef GR00T_FINISH_RESIDUAL
    DataflowBuffer dfb_res(cb_res);
#endif

    compute_kernel_hw_startup(cb_x, cb_y);
    copy_init(cb_x);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t u = 0; u < units; ++u) {
        const uint32_t unit = get_arg_val<uint32_t>(2 + u);
        const uint32_t cw = unit & 0xffff, pieces = unit >> 16;
        dfb_bias.wait_front(cwmax);
        for (uint32_t t = 0; t < cw; ++t) {
            dfb_x.wait_front(pmax);
            tile_regs_acquire();
            copy_tile(cb_x, 0, 0);
            for (uint32_t p = 1; p < pieces; ++p) {
                copy_tile(cb_x, p, 1);
                MATH((gr00t_sfpu::tile<gr00t_sfpu::add_next_tile_row>(0)));
            }
            copy_tile(cb_bias, t, 1);
            MATH((gr00t_sfpu::tile<gr00t_sfpu::bias_act_row>(0)));
#ifdef GR00T_FINISH_RESIDUAL
            dfb_res.wait_front(1);
            copy_tile(cb_res, 0, 1);
#ifdef GR00T_FINISH_MUL
            MATH((gr00t_sfpu::tile<gr00t_sfpu::mul_next_tile_row>(0)));
#else
            MATH((gr00t_sfpu::tile<gr00t_sfpu::add_next_tile_row>(0)));
#endif
#endif
            gr00t_compute::pack_dst0(dfb_y, cb_y);
            dfb_x.pop_front(pmax);
#ifdef GR00T_FINISH_RESIDUAL
            dfb_res.pop_front(1);
#endif
        }
        dfb_bias.pop_front(cwmax);
    }
}
