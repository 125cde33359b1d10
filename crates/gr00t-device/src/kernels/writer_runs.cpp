// SPDX-License-Identifier: Apache-2.0
// DRAM writer of runs of whole tiles (RISCV_0), possibly into several tensors: CB 16's tiles, in order,
// run after run, each run to pages first .. first + count of its interleaved TILE tensor (a matmul end's
// units). The runs come in tasks, one per end of a chain this core takes part in: after a task's runs, when
// the next phase of the chain runs in the same program (the next LayerNorm, attention or matmul,
// graph.rs), it increments semaphore 0 of each of that phase's cores once every write is acknowledged.
// Its task table (task_table.h, CB 31): tasks; per task its runs, per run buffer address, first page, page
// count; then the cores to signal (0: none) and each one's NOC x and y (16-bit halves, x low).
// Compile-time args after the table's: an output's accessor args (every run's tensor is alike).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS writer_runs.cpp@@

void kernel_main() {
    const TaskTable<31> t;
    constexpr auto args = TensorAccessorArgs<TABLE_CTA_END>();
    const uint32_t page = get_local_cb_interface(cb_out).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb(cb_out);
    for (uint32_t task = 0, tasks = t[0], a = 1; task < tasks; ++task) {
        const uint32_t runs = t[a++];
        for (uint32_t run = 0; run < runs; ++run, a += 3) {
            const auto dst = TensorAccessor(args, t[a]);
            const uint32_t first = t[a + 1], count = t[a + 2];
            for (uint32_t i = 0; i < count; ++i) {
                dfb.wait_front(1);
                noc.async_write(dfb, dst, page, {}, {.page_id = first + i});
                noc.async_writes_flushed();
                dfb.pop_front(1);
            }
        }
        const uint32_t signal = t[a++];
        signal_cores(t, a, signal);
        a += signal;
    }
    noc.async_write_barrier();
}
