// SPDX-License-Identifier: Apache-2.0
// Reader of the streaming row norm (norm_stream.cpp; RISCV_1), task after task: first the count of semaphore
// 0 to wait for (0: none), then the reduce scaler tile (CB 1); then per tile row of this core the row's Wt
// tiles of x twice, in chunks of GR00T_NORM_CHUNK pages (a row's last chunk padded with pages left
// unwritten, so a chunk never straddles a CB's wrap) (CB 0): once for the statistics, once for the
// output, the second time each chunk with the same columns' tiles of g and b (CBs 2 and 3; with
// GR00T_NORM_RMS no b). So L1 holds a few chunks, never a whole row, at any width: x is read from DRAM
// twice instead. All fp32 interleaved TILE tensors; only row 0 of a vector tile matters (the compute
// kernel uses it as a row broadcast).
// Its task table (task_table.h, CB 30) is reader_rows.cpp's, so the worker builds it the same way: tasks;
// per task 11 words: x, scaler, g, b addresses; Wt; first tile row; tile rows; vec_tiles (must be Wt);
// b's first column in row 0 of its tensor (a whole tile: its tiles are read as pages from there; the
// AdaLN split of a column inside a tile is not supported); the vectors' real length (unused); the count
// to wait for. Compile-time args after the table's: the four tensors' accessor args, in that order.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS reader_rows_stream.cpp@@

namespace {
constexpr uint32_t CHUNK = GR00T_NORM_CHUNK;
}  // namespace

template <typename Table>
void read_task(const Table& tab, uint32_t a) {
    const uint32_t x_addr = tab[a + 0];
    const uint32_t scaler_addr = tab[a + 1];
    const uint32_t g_addr = tab[a + 2];
    const uint32_t b_addr = tab[a + 3];
    const uint32_t wt_count = tab[a + 4];
    const uint32_t first_row = tab[a + 5];
    const uint32_t row_tiles = tab[a + 6];
    const uint32_t b_tile = tab[a + 8] >> 5;
    if (const uint32_t wait = tab[a + 10]; wait > 0) {
        noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), wait);
    }
    constexpr auto x_args = TensorAccessorArgs<TABLE_CTA_END>();
    constexpr auto s_args = TensorAccessorArgs<x_args.next_compile_time_args_offset()>();
    constexpr auto g_args = TensorAccessorArgs<s_args.next_compile_time_args_offset()>();
    constexpr auto b_args = TensorAccessorArgs<g_args.next_compile_time_args_offset()>();
    const auto x = TensorAccessor(x_args, x_addr);
    const auto scaler = TensorAccessor(s_args, scaler_addr);
    const auto g = TensorAccessor(g_args, g_addr);
    const auto b = TensorAccessor(b_args, b_addr);
    const uint32_t page = get_local_cb_interface(cb_x).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_x(cb_x), dfb_s(cb_scaler), dfb_g(cb_g);
#ifndef GR00T_NORM_RMS
    DataflowBuffer dfb_b(cb_b);
#else
    (void)b;
    (void)b_tile;
#endif

    dfb_s.reserve_back(1);
    noc.async_read(scaler, dfb_s, page, {.page_id = 0}, {.offset_bytes = 0});
    noc.async_read_barrier();
    dfb_s.push_back(1);
    for (uint32_t r = first_row; r < first_row + row_tiles; ++r) {
        // pass 0: x for the statistics; pass 1: x with g and b for the output
        for (uint32_t pass = 0; pass < 2; ++pass) {
            for (uint32_t t0 = 0; t0 < wt_count; t0 += CHUNK) {
                const uint32_t n = wt_count - t0 < CHUNK ? wt_count - t0 : CHUNK;
                dfb_x.reserve_back(CHUNK);
                for (uint32_t i = 0; i < n; ++i) {
                    noc.async_read(x, dfb_x, page, {.page_id = r * wt_count + t0 + i}, {.offset_bytes = i * page});
                }
                if (pass == 1) {
                    dfb_g.reserve_back(CHUNK);
#ifndef GR00T_NORM_RMS
                    dfb_b.reserve_back(CHUNK);
#endif
                    for (uint32_t i = 0; i < n; ++i) {
                        noc.async_read(g, dfb_g, page, {.page_id = t0 + i}, {.offset_bytes = i * page});
#ifndef GR00T_NORM_RMS
                        noc.async_read(b, dfb_b, page, {.page_id = b_tile + t0 + i}, {.offset_bytes = i * page});
#endif
                    }
                }
                noc.async_read_barrier();
                dfb_x.push_back(CHUNK);
                if (pass == 1) {
                    dfb_g.push_back(CHUNK);
#ifndef GR00T_NORM_RMS
                    dfb_b.push_back(CHUNK);
#endif
                }
            }
        }
    }
}

void kernel_main() {
    const TaskTable<30> t;
    for (uint32_t task = 0, tasks = t[0]; task < tasks; ++task) {
        read_task(t, 1 + task * 11);
    }
}
