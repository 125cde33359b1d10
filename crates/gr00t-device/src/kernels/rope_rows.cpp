// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding, NEOX layout (Hugging Face's rotate_half; Qwen3's q and k after their norms), per
// head of hd columns padded to hp = 32 * N whole tiles (N = GR00T_ROPE_HEAD_TILES):
//   out = x * cos + rotate_half(x) * sin,   rotate_half(x) = [-x[hd/2:], x[:hd/2]],
// cos and sin per row (position) and column, zero past hd (so the padding columns come out 0). The reader
// (reader_rope.cpp) hands over one head of one tile row at a time: its N tiles of x (CB 0) and the N tiles of
// cos (CB 1) and sin (CB 2) of that tile row.
// * hd a multiple of 64 (Qwen3-1.7B: 128, N = 4): rotate_half moves whole tiles. Output tile t takes x's tile t
//   and its partner p = t + N/2 (mod N), the partner's sign - in the first half, + in the second. No FPU:
//   x_t, x_p, cos_t and sin_t are unpacked straight to the fp32 DST (unpack-to-dest CBs) and the SFPU computes
//   x_t cos_t -+ x_p sin_t in fp32 (one product rounded, then a fused multiply-add), packed once to bf16.
// * hd <= 32 (GR00T_ROPE_MATMUL, N = 1: the head and its zero padding in one tile): rotate_half moves columns
//   within the tile, which the SFPU cannot. x @ R on the FPU instead, R the rotation tile (CB 3: -1 at
//   (j + hd/2, j) for j < hd/2, +1 at (j - hd/2, j) for hd/2 <= j < hd, zero elsewhere; the signs in R), from
//   the x tile's second copy (CB 4: a matmul operand, not unpacked to DST), packed to CB 5 as fp32 (exact: the
//   products are +-x at the FPU's 19-bit precision, each column one term); then the same SFPU combine with
//   the + sign. The only rounding beyond fp32 is x's to the FPU's 10 mantissa bits in that one term, below
//   the bf16 output's.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h at GR00T_COMPUTE_PIECES, and defines
// GR00T_ROPE_HEAD_TILES (N) and, for hd <= 32, GR00T_ROPE_MATMUL.
// Runtime args: tasks; per task N and the heads (view rows) on this core (16-bit halves, low first).
// CBs (fp32 unless said): 0 x (2N), 1 cos (2N), 2 sin (2N), and with GR00T_ROPE_MATMUL 3 R (1), 4 x for the
// matmul (2), 5 x @ R (2); 16 the output (bf16). 0, 1, 2 and 5 are unpacked straight to DST.
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/compute/matmul.h"
#include "api/compute/reconfig_data_format.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@

namespace gr00t_sfpu {
// DST 0 holds x, DST 1 the rotated term b (x's partner tile, or x @ R), DST 2 cos, DST 3 sin:
// LREG0 <- x cos + b sin (NEG: x cos - b sin).
template <bool NEG>
inline void rope_row() {
    TTI_SFPLOAD(L1, 0, ADDR_MOD_7, DST_NEXT_TILE);      // b
    TTI_SFPLOAD(L2, 0, ADDR_MOD_7, 2 * DST_NEXT_TILE);  // cos
    TTI_SFPLOAD(L3, 0, ADDR_MOD_7, 3 * DST_NEXT_TILE);  // sin
    TTI_SFPMAD(L1, L3, ZERO, L1, NEG ? NEG_A : 0);      // +-b sin
    TTI_SFPMAD(L0, L2, L1, L0, 0);                      // x cos +- b sin
}
}  // namespace gr00t_sfpu
#endif
//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS rope_rows.cpp@@

namespace {
constexpr uint32_t N = GR00T_ROPE_HEAD_TILES;

// Output tile t of a head whose tiles are at the front of CB 0 (and cos / sin of its tile row at CBs 1, 2):
// x_t, the rotated term (tile `b_index` of CB `b_cb`), cos_t, sin_t to DST 0..3, the combine, packed to y.
inline void combine(uint32_t t, uint32_t b_cb, uint32_t b_index, bool neg, DataflowBuffer& dfb_y) {
    tile_regs_acquire();
    copy_tile(cb_x, t, 0);
    copy_tile(b_cb, b_index, 1);
    copy_tile(cb_cos, t, 2);
    copy_tile(cb_sin, t, 3);
    if (neg) {
        MATH((gr00t_sfpu::tile<gr00t_sfpu::rope_row<true>>(0)));
    } else {
        MATH((gr00t_sfpu::tile<gr00t_sfpu::rope_row<false>>(0)));
    }
    gr00t_compute::pack_dst0(dfb_y, cb_y);
}
}  // namespace

void kernel_main() {
    DataflowBuffer dfb_x(cb_x), dfb_cos(cb_cos), dfb_sin(cb_sin), dfb_y(cb_y);
#ifdef GR00T_ROPE_MATMUL
    DataflowBuffer dfb_rot(cb_rot), dfb_xm(cb_xm), dfb_w(cb_w);
#endif
    compute_kernel_hw_startup(cb_x, cb_y);
    copy_init(cb_x);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t heads = get_arg_val<uint32_t>(1 + task) >> 16;
#ifdef GR00T_ROPE_MATMUL
        dfb_rot.wait_front(1);
#endif
        for (uint32_t h = 0; h < heads; ++h) {
            dfb_x.wait_front(N);
            dfb_cos.wait_front(N);
            dfb_sin.wait_front(N);
#ifdef GR00T_ROPE_MATMUL
            // rotate_half(x) = x @ R on the FPU, kept fp32
            dfb_xm.wait_front(1);
            reconfig_data_format(cb_rot, cb_xm);
            matmul_init(cb_xm, cb_rot, 0);
            pack_reconfig_data_format(cb_w);
            tile_regs_acquire();
            matmul_tiles(cb_xm, cb_rot, 0, 0, 0);
            gr00t_compute::pack_dst0(dfb_w, cb_w);
            dfb_xm.pop_front(1);
            dfb_w.wait_front(1);
            // back to copies into DST for the combine
            reconfig_data_format(cb_x, cb_x);
            copy_init(cb_x);
            pack_reconfig_data_format(cb_y);
            combine(0, cb_w, 0, false, dfb_y);
            dfb_w.pop_front(1);
#else
            for (uint32_t t = 0; t < N; ++t) {
                const bool first_half = t < N / 2;
                combine(t, cb_x, first_half ? t + N / 2 : t - N / 2, first_half, dfb_y);
            }
#endif
            dfb_x.pop_front(N);
            dfb_cos.pop_front(N);
            dfb_sin.pop_front(N);
        }
#ifdef GR00T_ROPE_MATMUL
        dfb_rot.pop_front(1);
#endif
    }
}
