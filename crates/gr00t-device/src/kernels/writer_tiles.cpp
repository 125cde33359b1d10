// SPDX-License-Identifier: Apache-2.0
// DRAM writer of runs of whole tiles (RISCV_0): CB 16's tiles, in order, a run per task, each to pages
// first .. first + count of its interleaved TILE tensor. A task is one phase of a chain this core takes part
// in (a LayerNorm before its matmul, graph.rs), or the whole of a program of its own: after a task's run,
// when the next phase of the same program reads it, it increments semaphore 0 of each of that phase's
// cores once every write is acknowledged.
// Its task table (task_table.h, CB 31): tasks; per task buffer address, first page, page count, the cores to
// signal (0: none), then each one's NOC x and y (16-bit halves, x low). Compile-time args after the table's:
// the tensors' accessor args (every task's tensor is alike).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS writer_tiles.cpp@@

void kernel_main() {
    const TaskTable<31> t;
    constexpr auto args = TensorAccessorArgs<TABLE_CTA_END>();
    const uint32_t page = get_local_cb_interface(cb_out).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb(cb_out);
    for (uint32_t task = 0, tasks = t[0], a = 1; task < tasks; ++task) {
        const auto dst = TensorAccessor(args, t[a]);
        const uint32_t first = t[a + 1], count = t[a + 2], signal = t[a + 3];
        a += 4;
        for (uint32_t i = 0; i < count; ++i) {
            dfb.wait_front(1);
            noc.async_write(dfb, dst, page, {}, {.page_id = first + i});
            noc.async_writes_flushed();
            dfb.pop_front(1);
        }
        signal_cores(t, a, signal);
        a += signal;
    }
    noc.async_write_barrier();
}
