// SPDX-License-Identifier: Apache-2.0
// Attention per head on the device, heads shared over cores (one head at a time per core): for each
// 32-row tile row i of the head's queries,
//   S = scale * Q_i K^T   (matmul_tiles with K transposed, over the head-dim tiles; the scale on the SFPU)
//   S += mask             (0 for real keys, -1e30 for padding / masked-out keys: row broadcast)
//   P = softmax(S)        (row max by reduce_tile MAX, exp(S - max) on the SFPU, row sum by reduce_tile SUM,
//                          its reciprocal on the SFPU, the scaling as a column broadcast), packed to bf16
//   O_i = P V             (matmul_tiles over the key tiles), packed to bf16.
// Causal (a task's flag): query tile row i takes only key tiles 0 .. i (those after are wholly above the
// diagonal: weight 0, skipped), key tile i with the reader's diagonal tile (CB 7: the key mask and -1e30
// above the diagonal, added element-wise) instead of the mask row; nothing else changes (the sums run over
// fewer tiles; the work CBs' pointers are moved on past the skipped tiles' pages, so that every tile row
// starts at its CBs' start). GQA needs nothing here: the reader hands each query head its group's K and V.
// Q, K, V arrive as bf16 tiles with the head dim zero-padded to whole tiles (48 -> 64: the zero columns
// add nothing to Q K^T and give zero output columns); S, the exponentials and the statistics are fp32.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and compute_pieces.h (pass, the row softmax) at
// GR00T_COMPUTE_PIECES, and defines GR00T_ATTN_SCALE (1/sqrt(head dim)).
// Runtime args: tasks (one per attention of a chain this core takes part in: the reader sends the scaler
// and the mask again with each); per task 3 words: heads on this core and query tile rows (mt), key tiles
// (nt) and head-dim tiles (dt), 16-bit halves, low first; causal (0 or 1).
// CBs: 0 Q (mt*dt, bf16), 1 the reduce scaler (fp32), 2 K and 3 V (nt*dt, bf16), 5 mask (nt, fp32),
// 7 the diagonal masks (causal only: min(mt, nt), fp32),
// 8 S, 9 S + mask, 10 exp (nt each, fp32), 11 max, 12 1/sum (fp32), 13 P (nt, bf16), 16 O (bf16).
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/compute/matmul.h"
#include "api/compute/bcast.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/reduce.h"
#include "api/compute/reconfig_data_format.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@
namespace gr00t_sfpu {
inline void scale_row() {
    load_f32<L1, bits(GR00T_ATTN_SCALE)>();
    TTI_SFPMUL(L0, L1, ZERO, L0, 0);
}
}  // namespace gr00t_sfpu
#endif

//@@GR00T_COMPUTE_PIECES@@
//@@GR00T_CB_IDS attention_head.cpp@@

namespace {
// Moves a work CB's pointers on by n pages that hold nothing (this kernel both packs and unpacks it): a causal
// tile row takes nk < nt key tiles, and tile indices into a CB do not wrap around its end, so each tile row's
// tiles must start where a full row's would (at the CB's start: its nt pages are one row).
inline void skip_pages(DataflowBuffer& dfb, uint32_t n) {
    dfb.reserve_back(n);
    dfb.push_back(n);
    dfb.wait_front(n);
    dfb.pop_front(n);
}
}  // namespace

void kernel_main() {
    using gr00t_compute::pass;
    DataflowBuffer dfb_q(cb_q), dfb_scaler(cb_scaler), dfb_k(cb_k), dfb_v(cb_v), dfb_mask(cb_mask), dfb_s(cb_s),
        dfb_s2(cb_s2), dfb_e(cb_e), dfb_max(cb_max), dfb_rsum(cb_rsum), dfb_p(cb_p), dfb_o(cb_o),
        dfb_diag(cb_diag);

    compute_kernel_hw_startup(cb_q, cb_k, cb_s);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t task = 0, tasks = get_arg_val<uint32_t>(0); task < tasks; ++task) {
        const uint32_t heads = get_arg_val<uint32_t>(1 + task * 3) & 0xffff;
        const uint32_t mt = get_arg_val<uint32_t>(1 + task * 3) >> 16;
        const uint32_t nt = get_arg_val<uint32_t>(2 + task * 3) & 0xffff;
        const uint32_t dt = get_arg_val<uint32_t>(2 + task * 3) >> 16;
        const bool causal = get_arg_val<uint32_t>(3 + task * 3) != 0;
        const uint32_t nd = causal ? (mt < nt ? mt : nt) : 0;  // diagonal tiles
        dfb_scaler.wait_front(1);
        dfb_mask.wait_front(nt);
        if (nd > 0) {
            dfb_diag.wait_front(nd);
        }
        for (uint32_t h = 0; h < heads; ++h) {
            dfb_q.wait_front(mt * dt);
            dfb_k.wait_front(nt * dt);
            dfb_v.wait_front(nt * dt);
            for (uint32_t i = 0; i < mt; ++i) {
                // The key tiles this query tile row takes (causal: up to its diagonal), and whether the last
                // is the diagonal one.
                const bool diag = i < nd;
                const uint32_t nk = causal && i + 1 < nt ? i + 1 : nt;
                // S = scale * Q K^T
                reconfig_data_format(cb_k, cb_q);
                matmul_init(cb_q, cb_k, 1);
                pack_reconfig_data_format(cb_s);
                pass(nk, dfb_s, cb_s, [&](uint32_t j) {
                    for (uint32_t d = 0; d < dt; ++d) {
                        matmul_tiles(cb_q, cb_k, i * dt + d, j * dt + d, 0);
                    }
                    MATH((gr00t_sfpu::tile<gr00t_sfpu::scale_row>(0)));
                });
                dfb_s.wait_front(nk);
                // + mask (0 or -1e30 per key column)
                reconfig_data_format(cb_s, cb_mask);
                add_bcast_rows_init(cb_s, cb_mask);
                pass(diag ? nk - 1 : nk, dfb_s2, cb_s2,
                     [&](uint32_t j) { add_tiles_bcast_rows(cb_s, cb_mask, j, j, 0); });
                if (diag) {
                    // + the diagonal tile (the mask row, and -1e30 above the diagonal): key tile i = nk - 1
                    add_init(cb_s, cb_diag, false);
                    pass(1, dfb_s2, cb_s2, [&](uint32_t) { add_tiles(cb_s, cb_diag, i, i, 0); });
                }
                dfb_s.pop_front(nk);
                // P = softmax(S + mask), bf16
                gr00t_compute::row_softmax(nk, {cb_s2, dfb_s2}, cb_scaler, {cb_e, dfb_e}, {cb_max, dfb_max},
                                           {cb_rsum, dfb_rsum}, {cb_p, dfb_p});
                dfb_p.wait_front(nk);
                // O = P V
                reconfig_data_format(cb_v, cb_p);
                matmul_init(cb_p, cb_v, 0);
                pack_reconfig_data_format(cb_o);
                pass(dt, dfb_o, cb_o, [&](uint32_t d) {
                    for (uint32_t kt = 0; kt < nk; ++kt) {
                        matmul_tiles(cb_p, cb_v, kt, kt * dt + d, 0);
                    }
                });
                dfb_p.pop_front(nk);
                if (nk < nt) {
                    for (DataflowBuffer* dfb : {&dfb_s, &dfb_s2, &dfb_e, &dfb_p}) {
                        skip_pages(*dfb, nt - nk);
                    }
                }
            }
            dfb_q.pop_front(mt * dt);
            dfb_k.pop_front(nt * dt);
            dfb_v.pop_front(nt * dt);
        }
        dfb_scaler.pop_front(1);
        dfb_mask.pop_front(nt);
        if (nd > 0) {
            dfb_diag.pop_front(nd);
        }
    }
}
