// SPDX-License-Identifier: Apache-2.0
// DRAM reader of one compute core's matmul share (RISCV_1 of the compute core).
//
// 1. The activation block A[m, k_start .. k_start + k_count] for every tile row m (bf16 tiles of an
//    interleaved TILE tensor, row stride `act_kt` tiles) into CB 0, once.
// 2. The core's weight tiles, straight from the arena buffer in DRAM (one page = one arena tile,
//    interleaved over the banks as uploaded), in arena order: column by column, K fastest, which is the
//    order `tt_blackhole::split` stored them in. One column strip (k_count tiles) per CB 1 push; the
//    CB holds two strips, so the next strip streams while the FPU works on this one.
// A program may hold several matmuls ("jobs": the AdaLN of every block, a self block's Q, K and V, the
// observation's cross K and V; independent, the same activation dtype, the same output dtype): the core
// does its share of each in turn, so they cost one launch, not one each.
// A reservation must not run past the end of its CB (the kernels index a block as contiguous pages), and
// jobs' blocks differ in size: before a block that would, both sides skip the CB's last pages (the reader
// pushes them unwritten, the compute kernel pops them unread), so every block starts contiguous.
// When an earlier phase of the same program writes a job's activations (a LayerNorm, the attention, or a
// matmul's end in a chain of several matmuls, graph.rs), the reader first waits until this core's semaphore
// 0 holds the job's count: the increments of every core of every phase this core waited for so far, its
// own jobs' phases in order (a chain is one line of phases, so the increments arrive in that order too).
// Each job names its own arena (the DiT's, or the action head's: one program may stream both); every arena
// is an interleaved buffer of one tile per page in the same format, so one accessor's args serve them all.
// Its task table (task_table.h, CB 30): the first job's arena address; jobs; CB 0's and CB 1's pages; per
// job 6 words (two 16-bit halves, low first, where a word holds two): act address; absolute page of the
// share's first tile in its arena; n_count and k_count; k_start and act_kt; m_tiles and the semaphore count
// to wait for (0: none); the job's arena address. Compile-time args after the table's: an activation's
// accessor args (every job's activation is an interleaved bf16 TILE tensor), an arena's.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS reader_share.cpp@@

void kernel_main() {
    const TaskTable<30> t;
    const uint32_t jobs = t[1];
    const uint32_t act_cb_pages = t[2];
    const uint32_t w_cb_pages = t[3];

    constexpr auto act_args = TensorAccessorArgs<TABLE_CTA_END>();
    constexpr auto arena_args = TensorAccessorArgs<act_args.next_compile_time_args_offset()>();
    const uint32_t act_page = get_local_cb_interface(cb_act).fifo_page_size;
    const uint32_t w_page = get_local_cb_interface(cb_w).fifo_page_size;

    Noc noc;
    DataflowBuffer dfb_act(cb_act);
    DataflowBuffer dfb_w(cb_w);
    uint32_t act_at = 0, w_at = 0;  // pages pushed so far, modulo the CB's pages
    const auto fit = [](DataflowBuffer& dfb, uint32_t& at, uint32_t n, uint32_t pages) {
        if (at + n > pages) {
            dfb.reserve_back(pages - at);
            dfb.push_back(pages - at);
            at = 0;
        }
        at = (at + n) % pages;
    };

    for (uint32_t j = 0; j < jobs; ++j) {
        const uint32_t a = 4 + j * 6;
        const uint32_t nk = t[a + 2], ks = t[a + 3];
        const uint32_t mw = t[a + 4];
        if (const uint32_t count = mw >> 16; count > 0) {
            noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), count);
        }
        const auto act = TensorAccessor(act_args, t[a]);
        const auto arena = TensorAccessor(arena_args, t[a + 5]);
        const uint32_t first_tile = t[a + 1];
        const uint32_t n_count = nk & 0xffff, k_count = nk >> 16;
        const uint32_t k_start = ks & 0xffff, act_kt = ks >> 16;
        const uint32_t m_tiles = mw & 0xffff;
        fit(dfb_act, act_at, m_tiles * k_count, act_cb_pages);
        dfb_act.reserve_back(m_tiles * k_count);
        for (uint32_t m = 0; m < m_tiles; ++m) {
            for (uint32_t k = 0; k < k_count; ++k) {
                noc.async_read(act, dfb_act, act_page, {.page_id = m * act_kt + k_start + k},
                               {.offset_bytes = (m * k_count + k) * act_page});
            }
        }
        noc.async_read_barrier();
        dfb_act.push_back(m_tiles * k_count);

        uint32_t page = first_tile;
        for (uint32_t n = 0; n < n_count; ++n) {
            fit(dfb_w, w_at, k_count, w_cb_pages);
            dfb_w.reserve_back(k_count);
            for (uint32_t k = 0; k < k_count; ++k, ++page) {
                noc.async_read(arena, dfb_w, w_page, {.page_id = page}, {.offset_bytes = k * w_page});
            }
            noc.async_read_barrier();
            dfb_w.push_back(k_count);
        }
    }
}
