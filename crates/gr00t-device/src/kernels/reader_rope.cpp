// SPDX-License-Identifier: Apache-2.0
// Reader of the rotary position embedding (rope_rows.cpp; RISCV_1), task after task. It reads x
// [32 * row_tiles, heads * hp] (fp32, heads padded to hp = 32 * GR00T_ROPE_HEAD_TILES columns) as the view
// [32 * row_tiles * heads, hp]: a TILE tensor's pages are its tiles in row-major order, so view row v is head
// v % heads of tile row v / heads, and its tiles are pages v * hp/32 .. on. The host shares the view's rows over
// the cores (one head of one tile row is a unit: a decode's single tile row still spreads over the cores).
// Per view row: the head's tiles of x (CB 0), then the cos and sin tiles of its tile row (CBs 1 and 2, from the
// [32 * row_tiles, hp] tables; read again for each head: three reads per x tile, cheap next to what a row
// costs to compute, and the compute kernel needs no bookkeeping of when the tile row changes). With
// GR00T_ROPE_MATMUL (a head within one tile: hd <= 32) also the rotation tile once per task (CB 3) and the
// x tile a second time into CB 4, the matmul's operand (CB 0 is unpacked straight to the fp32 DST, which a
// matmul operand must not be).
// Its task table (task_table.h, CB 30) is reader_rows.cpp's, so the worker builds it the same way: tasks;
// per task 11 words: x, cos, sin, rot addresses (the row steps' x, scaler, g, b slots); Wt (= hp / 32); first
// view row; view rows; vec_tiles (unused); b_col (unused); heads (the vec_len slot); the count of semaphore 0 to
// wait for (0: none). Compile-time args after the table's: the four tensors' accessor args, in that order.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS reader_rope.cpp@@

template <typename Table>
void read_task(const Table& tab, uint32_t a) {
    const uint32_t x_addr = tab[a + 0];
    const uint32_t cos_addr = tab[a + 1];
    const uint32_t sin_addr = tab[a + 2];
    const uint32_t rot_addr = tab[a + 3];
    const uint32_t n = tab[a + 4];
    const uint32_t first_row = tab[a + 5];
    const uint32_t view_rows = tab[a + 6];
    const uint32_t heads = tab[a + 9];
    if (const uint32_t wait = tab[a + 10]; wait > 0) {
        noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), wait);
    }
    constexpr auto x_args = TensorAccessorArgs<TABLE_CTA_END>();
    constexpr auto c_args = TensorAccessorArgs<x_args.next_compile_time_args_offset()>();
    constexpr auto s_args = TensorAccessorArgs<c_args.next_compile_time_args_offset()>();
    constexpr auto r_args = TensorAccessorArgs<s_args.next_compile_time_args_offset()>();
    const auto x = TensorAccessor(x_args, x_addr);
    const auto cos_tab = TensorAccessor(c_args, cos_addr);
    const auto sin_tab = TensorAccessor(s_args, sin_addr);
    const auto rot = TensorAccessor(r_args, rot_addr);
    const uint32_t page = get_local_cb_interface(cb_x).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_x(cb_x), dfb_cos(cb_cos), dfb_sin(cb_sin);
#ifdef GR00T_ROPE_MATMUL
    DataflowBuffer dfb_rot(cb_rot), dfb_xm(cb_xm);
    dfb_rot.reserve_back(1);
    noc.async_read(rot, dfb_rot, page, {.page_id = 0}, {.offset_bytes = 0});
    noc.async_read_barrier();
    dfb_rot.push_back(1);
#else
    (void)rot;
#endif
    for (uint32_t v = first_row; v < first_row + view_rows; ++v) {
        const uint32_t r = v / heads;  // the tile row: the tables' row of tiles
        dfb_x.reserve_back(n);
        dfb_cos.reserve_back(n);
        dfb_sin.reserve_back(n);
#ifdef GR00T_ROPE_MATMUL
        dfb_xm.reserve_back(n);
#endif
        for (uint32_t i = 0; i < n; ++i) {
            noc.async_read(x, dfb_x, page, {.page_id = v * n + i}, {.offset_bytes = i * page});
            noc.async_read(cos_tab, dfb_cos, page, {.page_id = r * n + i}, {.offset_bytes = i * page});
            noc.async_read(sin_tab, dfb_sin, page, {.page_id = r * n + i}, {.offset_bytes = i * page});
#ifdef GR00T_ROPE_MATMUL
            noc.async_read(x, dfb_xm, page, {.page_id = v * n + i}, {.offset_bytes = i * page});
#endif
        }
        noc.async_read_barrier();
        dfb_x.push_back(n);
        dfb_cos.push_back(n);
        dfb_sin.push_back(n);
#ifdef GR00T_ROPE_MATMUL
        dfb_xm.push_back(n);
#endif
    }
}

void kernel_main() {
    const TaskTable<30> t;
    for (uint32_t task = 0, tasks = t[0]; task < tasks; ++task) {
        read_task(t, 1 + task * 11);
    }
}
