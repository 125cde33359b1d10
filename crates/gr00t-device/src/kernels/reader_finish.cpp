// SPDX-License-Identifier: Apache-2.0
// Reader of the end of a matmul (bias_act_rows.cpp; RISCV_1): one unit of cw output tiles of tile row r,
// columns c0 .. c0 + cw of the fp32 partials x [pieces * piece_rows tile rows, W tiles] (the matmul's K
// pieces one below the other). First the unit's bias tiles (CB 2, the bias replicated over 32 rows, fp32),
// then per output tile its `pieces` partial tiles, piece by piece (CB 0), so L1 holds a unit's bias and a
// few partials, never a whole row (the FF-up's 192-tile rows would not fit).
// A core may do several units, of one matmul or of several (a program's jobs), one after the other.
// With GR00T_FINISH_RESIDUAL defined, each output tile's partials are followed by the same tile of the fp32
// residual stream [rows, W tiles] (CB 3), which the compute kernel adds.
// A core's units come in tasks, one per end of a chain it takes part in (its group's ends, graph.rs): before
// a task's units the reader waits until this core's semaphore 0 holds the task's count (the increments of
// every core of every phase before one of its tasks so far; 0: none, the partials are there). The CBs
// hold the largest unit of the program: every block is pushed at that size (the pages past the unit's
// unwritten, popped unread), so a block always starts where the CB does and the tiles of one are
// contiguous, whatever units of other sizes came before.
// Its task table (task_table.h, CB 30): tasks; the most K pieces and the widest unit (16-bit halves); per
// task the count to wait for, its units, then per unit UNIT_WORDS words: x, bias (, residual) addresses; W;
// r; c0; cw; pieces; piece_rows. Compile-time args after the table's: a partials tensor's, a bias
// tensor's (and a stream's) accessor args (every unit's are alike: interleaved fp32 TILE tensors).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS reader_finish.cpp@@

#ifdef GR00T_FINISH_RESIDUAL
constexpr uint32_t EXTRA = 1;  // the stream's address after the bias's
#else
constexpr uint32_t EXTRA = 0;
#endif
constexpr uint32_t UNIT_WORDS = 8 + EXTRA;

void kernel_main() {
    const TaskTable<30> t;
    const uint32_t tasks = t[0];
    const uint32_t pmax = t[1] & 0xffff, cwmax = t[1] >> 16;
    constexpr auto x_args = TensorAccessorArgs<TABLE_CTA_END>();
    constexpr auto b_args = TensorAccessorArgs<x_args.next_compile_time_args_offset()>();
    const uint32_t page = get_local_cb_interface(cb_x).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_x(cb_x), dfb_b(cb_bias);
#ifdef GR00T_FINISH_RESIDUAL
    constexpr auto r_args = TensorAccessorArgs<b_args.next_compile_time_args_offset()>();
    DataflowBuffer dfb_r(cb_res);
#endif
    for (uint32_t task = 0, a = 2; task < tasks; ++task) {
        const uint32_t wait = t[a], units = t[a + 1];
        a += 2;
        if (wait > 0) {
            noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), wait);
        }
        for (uint32_t u = 0; u < units; ++u, a += UNIT_WORDS) {
            const auto x = TensorAccessor(x_args, t[a]);
            const auto bias = TensorAccessor(b_args, t[a + 1]);
#ifdef GR00T_FINISH_RESIDUAL
            const auto res = TensorAccessor(r_args, t[a + 2]);
#endif
            const uint32_t w = t[a + EXTRA + 2];
            const uint32_t r = t[a + EXTRA + 3];
            const uint32_t c0 = t[a + EXTRA + 4];
            const uint32_t cw = t[a + EXTRA + 5];
            const uint32_t pieces = t[a + EXTRA + 6];
            const uint32_t piece_rows = t[a + EXTRA + 7];
            dfb_b.reserve_back(cwmax);
            for (uint32_t i = 0; i < cw; ++i) {
                noc.async_read(bias, dfb_b, page, {.page_id = c0 + i}, {.offset_bytes = i * page});
            }
            noc.async_read_barrier();
            dfb_b.push_back(cwmax);
            for (uint32_t i = 0; i < cw; ++i) {
                dfb_x.reserve_back(pmax);
                for (uint32_t p = 0; p < pieces; ++p) {
                    noc.async_read(x, dfb_x, page, {.page_id = (p * piece_rows + r) * w + c0 + i},
                                   {.offset_bytes = p * page});
                }
                noc.async_read_barrier();
                dfb_x.push_back(pmax);
#ifdef GR00T_FINISH_RESIDUAL
                dfb_r.reserve_back(1);
                noc.async_read(res, dfb_r, page, {.page_id = r * w + c0 + i}, {.offset_bytes = 0});
                noc.async_read_barrier();
                dfb_r.push_back(1);
#endif
            }
        }
    }
}
