// SPDX-License-Identifier: Apache-2.0
// One compute core's matmul share on the FPU: for each of its n_count output tile columns and each
// activation tile row m, C[m, n] = sum over its K range of A[m, k] * W[k, n], accumulated in the
// destination register (fp32 when the program enables fp32_dest_acc_en) in K order, packed to the
// output CB (fp32 partials: the K pieces of a split column are added in piece order afterwards, as the
// plan's piece-0 core does). Weights arrive as one column strip of k_count tiles per CB 1 push.
// Runtime args: jobs (the program's matmuls, in the reader's order); CB 0's and CB 1's pages (the pages
// the reader skips to keep a block contiguous are popped unread here); per job one word: n_count (bits
// 0-9), k_count (10-20), m_tiles (21-31), so that a whole denoising step's jobs fit the 341 words.
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
#include <cstdint>
#include "api/compute/matmul.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/dataflow/dataflow_buffer.h"

//@@GR00T_CB_IDS matmul_share.cpp@@

void kernel_main() {
    const uint32_t jobs = get_arg_val<uint32_t>(0);
    const uint32_t act_cb_pages = get_arg_val<uint32_t>(1);
    const uint32_t w_cb_pages = get_arg_val<uint32_t>(2);

    DataflowBuffer dfb_act(cb_act);
    DataflowBuffer dfb_w(cb_w);
    DataflowBuffer dfb_out(cb_out);

    compute_kernel_hw_startup<SrcOrder::Reverse>(cb_act, cb_w, cb_out);
    matmul_init(cb_act, cb_w);
    uint32_t act_at = 0, w_at = 0;  // the reader's count of pages pushed, modulo the CB's pages
    const auto fit = [](DataflowBuffer& dfb, uint32_t& at, uint32_t n, uint32_t pages) {
        if (at + n > pages) {
            dfb.wait_front(pages - at);
            dfb.pop_front(pages - at);
            at = 0;
        }
        at = (at + n) % pages;
    };

    for (uint32_t j = 0; j < jobs; ++j) {
        const uint32_t job = get_arg_val<uint32_t>(3 + j);
        const uint32_t n_count = job & 0x3ff, k_count = (job >> 10) & 0x7ff, m_tiles = job >> 21;
        fit(dfb_act, act_at, m_tiles * k_count, act_cb_pages);
        dfb_act.wait_front(m_tiles * k_count);
        for (uint32_t n = 0; n < n_count; ++n) {
            fit(dfb_w, w_at, k_count, w_cb_pages);
            dfb_w.wait_front(k_count);
            for (uint32_t m = 0; m < m_tiles; ++m) {
                tile_regs_acquire();
                for (uint32_t k = 0; k < k_count; ++k) {
                    matmul_tiles(cb_act, cb_w, m * k_count + k, k, 0);
                }
                tile_regs_commit();
                dfb_out.reserve_back(1);
                tile_regs_wait();
                pack_tile(0, cb_out);
                tile_regs_release();
                dfb_out.push_back(1);
            }
            dfb_w.pop_front(k_count);
        }
        dfb_act.pop_front(m_tiles * k_count);
    }
}
