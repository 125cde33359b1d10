// SPDX-License-Identifier: Apache-2.0
// Reader of the row kernels (layernorm_rows.cpp, softmax_rows.cpp; RISCV_1), task after task (one per
// LayerNorm of a chain this core takes part in, graph.rs): first the count of semaphore 0 to wait for (the
// increments of every core of every phase before one of its tasks so far; 0: none), then the reduce
// scaler tile (CB 1) and, when vec_tiles > 0, the per-column vectors g and b (CBs 2 and 3, vec_tiles tiles
// each); then, per tile row of this core, the row's Wt tiles of x (CB 0). All fp32 interleaved TILE
// tensors. Its task table (task_table.h, CB 30): tasks; per task 11 words: x, scaler, g, b addresses
// (unused ones may repeat another); Wt; first tile row; tile rows; vec_tiles; b's first column in row 0 of
// its tensor; the vectors' real length; the count to wait for. b may be
// the second half of g's tensor: the AdaLN matmul's [scale | shift] row, so the AdaLN split is part of
// this read, not a program of its own. When b's first column is a whole tile (D = 1536) its tiles are
// read as pages; otherwise (the tiny config's D = 40) the tiles holding row 0 of b are read into the
// scratch CB 9 and row 0 is copied element by element into b's zeroed tiles, and the columns of g's last
// tile past its length (the shift's first values) are zeroed. Only row 0 of a vector tile is read: the
// compute kernel uses it as a row broadcast. Compile-time args after the table's: the four tensors'
// accessor args, in that order.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS reader_rows.cpp@@

namespace {
// Column c of a tile's row 0: face 0 (columns 0-15) or face 1 (16-31), each 256 elements.
inline uint32_t row0(uint32_t c) { return ((c >> 4) << 8) + (c & 15); }
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
    const uint32_t vec_tiles = tab[a + 7];
    const uint32_t b_col = tab[a + 8];
    const uint32_t vec_len = tab[a + 9];
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
    DataflowBuffer dfb_x(cb_x), dfb_s(cb_scaler), dfb_g(cb_g), dfb_b(cb_b);

    dfb_s.reserve_back(1);
    noc.async_read(scaler, dfb_s, page, {.page_id = 0}, {.offset_bytes = 0});
    noc.async_read_barrier();
    dfb_s.push_back(1);
    if (vec_tiles > 0) {
        dfb_g.reserve_back(vec_tiles);
        dfb_b.reserve_back(vec_tiles);
        const bool split = (b_col & 31) != 0;
        for (uint32_t wt = 0; wt < vec_tiles; ++wt) {
            noc.async_read(g, dfb_g, page, {.page_id = wt}, {.offset_bytes = wt * page});
            if (!split) {
                noc.async_read(b, dfb_b, page, {.page_id = (b_col >> 5) + wt}, {.offset_bytes = wt * page});
            }
        }
        if (split) {
            DataflowBuffer dfb_scratch(cb_scratch);
            const uint32_t scratch = dfb_scratch.get_write_ptr();
            const uint32_t t0 = b_col >> 5, t1 = (b_col + vec_len - 1) >> 5;
            for (uint32_t t = t0; t <= t1; ++t) {
                noc_async_read_page(t, b, scratch + (t - t0) * page);
            }
            noc.async_read_barrier();
            volatile uint32_t* gl = reinterpret_cast<volatile uint32_t*>(dfb_g.get_write_ptr());
            volatile uint32_t* bl = reinterpret_cast<volatile uint32_t*>(dfb_b.get_write_ptr());
            volatile uint32_t* sl = reinterpret_cast<volatile uint32_t*>(scratch);
            const uint32_t words = page / 4;  // fp32 tiles: one word per element
            for (uint32_t c = vec_len; c < vec_tiles * 32; ++c) {
                gl[(c >> 5) * words + row0(c & 31)] = 0;
            }
            for (uint32_t c = 0; c < vec_tiles * 32; ++c) {
                const uint32_t s = b_col + c - (t0 << 5);
                bl[(c >> 5) * words + row0(c & 31)] = c < vec_len ? sl[(s >> 5) * words + row0(s & 31)] : 0;
            }
        }
        noc.async_read_barrier();
        dfb_g.push_back(vec_tiles);
        dfb_b.push_back(vec_tiles);
    }
    for (uint32_t r = first_row; r < first_row + row_tiles; ++r) {
        dfb_x.reserve_back(wt_count);
        for (uint32_t wt = 0; wt < wt_count; ++wt) {
            noc.async_read(x, dfb_x, page, {.page_id = r * wt_count + wt}, {.offset_bytes = wt * page});
        }
        noc.async_read_barrier();
        dfb_x.push_back(wt_count);
    }
}

void kernel_main() {
    const TaskTable<30> t;
    for (uint32_t task = 0, tasks = t[0]; task < tasks; ++task) {
        read_task(t, 1 + task * 11);
    }
}
