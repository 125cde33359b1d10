// SPDX-License-Identifier: Apache-2.0
// Reader of attention_head.cpp (RISCV_1): once, the reduce scaler tile (CB 1) and the key mask (CB 5,
// nt fp32 tiles, the mask in row 0); then, per head of this core, its Q tiles (CB 0, mt*dt) and its K and V
// tiles (CBs 2 and 3, nt*dt each), cut out of the projections' own [rows, heads * hd] bf16 TILE tensors
// here, on the way into L1: the head split is part of the read, not a program of its own (no DRAM round
// trip through a per-head tensor). Head h's columns h*hd .. h*hd + hd land at columns 0 .. hd of its dt
// tiles, the rest of those tiles zero (the padding attention relies on: it adds nothing to Q K^T).
//
// Two ways to move a head's columns, the relayout's: when hd and h*hd are whole faces (multiples of 16:
// the full-size hd = 48), each 16 x 16 face is one NoC read straight from DRAM into its place; otherwise
// (the tiny config's hd = 10) the source tiles are read into a scratch CB and copied element by element
// in the tile's face order.
// Grouped-query attention (GQA): query head h reads K/V head h / group (group = query heads per K/V head;
// 1: every head its own K and V), cut out of K and V's own [rows, kv_heads * hd] tensors.
// Causal attention (query row r attends key rows j <= r, queries and keys indexed alike: a prompt's self
// attention): no per-(query tile, key tile) mask in DRAM. The compute kernel skips the key tiles wholly
// above a query tile row's diagonal (their weights are 0: no S, no softmax, no P V for them) and adds the
// key mask row to those wholly below as before; for the diagonal key tile i of query tile row i this reader
// builds, once per task, from the key mask row already in L1, a full fp32 tile D_i (CB 7, one per query tile
// row that has a diagonal key tile: min(mt, nt)): D_i[r][c] = key_mask[32 i + c] for c <= r, -1e30 above
// the diagonal, which the compute kernel adds element-wise instead of the row.
// A task per attention of a chain this core takes part in (graph.rs), or the one of a program of its own:
// first the count of semaphore 0 to wait for (the increments of every core of every phase before one of its
// tasks so far; 0: none), then the scaler, the mask (and the diagonal tiles when causal) and the heads, as
// above (the compute kernel pops the scaler, the mask and the diagonal tiles at the task's end). Its task
// table (task_table.h, CB 30): tasks; per task 16 words: q, k, v, scaler, mask addresses; first head;
// heads; mt; nt; dt; hd; q's width and k / v's width (tiles); the count to wait for; the GQA group; causal
// (0 or 1). Compile-time args after the table's: the five tensors' accessor args, in that order.
// CBs besides the compute kernel's: 4 one zero page (bf16), 6 the scratch (tiles(hd) + 1 bf16 pages),
// 7 the diagonal mask tiles (fp32, causal only).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@

//@@GR00T_TILE_COLUMNS@@
//@@GR00T_CB_IDS reader_attention.cpp@@

namespace {
// Head h of src ([rows tile rows, src_w tiles], bf16) into dst_l1: rows * dt pages, tile row by tile row.
template <typename Accessor>
void gather_head(const Accessor& src, uint32_t src_w, uint32_t rows, uint32_t h, uint32_t hd, uint32_t dt,
                 uint32_t dst_l1, uint32_t zero_l1, uint32_t scratch_l1) {
    constexpr uint32_t page = 2048, face = page / 4;
    const uint64_t zero = get_noc_addr(my_x[noc_index], my_y[noc_index], zero_l1);
    for (uint32_t t = 0; t < rows * dt; ++t) {
        noc_async_read(zero, dst_l1 + t * page, page);
    }
    noc_async_read_barrier();  // the zeros land before the head's columns do
    const uint32_t sc = h * hd;
    const bool faces = ((sc | hd) & 15) == 0;
    const uint32_t t0 = sc >> 5, t1 = (sc + hd - 1) >> 5;
    for (uint32_t i = 0; i < rows; ++i) {
        const uint32_t dbase = dst_l1 + i * dt * page;
        if (faces) {
            for (uint32_t g = 0; g < hd; g += 16) {
                const uint32_t s = sc + g;
                for (uint32_t half = 0; half < 2; ++half) {
                    const uint64_t from = src.get_noc_addr(i * src_w + (s >> 5), (half * 2 + ((s >> 4) & 1)) * face);
                    noc_async_read(from, dbase + (g >> 5) * page + (half * 2 + ((g >> 4) & 1)) * face, face);
                }
            }
            continue;
        }
        for (uint32_t t = t0; t <= t1; ++t) {
            noc_async_read_page(i * src_w + t, src, scratch_l1 + (t - t0) * page);
        }
        noc_async_read_barrier();
        copy_columns(scratch_l1, sc - (t0 << 5), dbase, 0, hd);
    }
    noc_async_read_barrier();
}

// The causal diagonal tiles: for each query tile row i < count, the fp32 tile at diag_l1 + i * page with
// D_i[r][c] = (row 0 of key mask tile i at mask_l1)[c] for c <= r, -1e30 for c > r (the key above the query).
void diagonal_masks(uint32_t mask_l1, uint32_t diag_l1, uint32_t count, uint32_t page) {
    constexpr float above = -1.0e30f;
    for (uint32_t i = 0; i < count; ++i) {
        volatile float* row0 = reinterpret_cast<volatile float*>(mask_l1 + i * page);
        volatile float* d = reinterpret_cast<volatile float*>(diag_l1 + i * page);
        float keys[32];
        for (uint32_t c = 0; c < 32; ++c) {
            keys[c] = row0[tile_offset(0, c)];
        }
        for (uint32_t r = 0; r < 32; ++r) {
            for (uint32_t c = 0; c < 32; ++c) {
                d[tile_offset(r, c)] = c <= r ? keys[c] : above;
            }
        }
    }
}
}  // namespace

template <typename Table>
void read_task(const Table& tab, uint32_t a) {
    const uint32_t q_addr = tab[a + 0];
    const uint32_t k_addr = tab[a + 1];
    const uint32_t v_addr = tab[a + 2];
    const uint32_t s_addr = tab[a + 3];
    const uint32_t m_addr = tab[a + 4];
    const uint32_t first_head = tab[a + 5];
    const uint32_t heads = tab[a + 6];
    const uint32_t mt = tab[a + 7];
    const uint32_t nt = tab[a + 8];
    const uint32_t dt = tab[a + 9];
    const uint32_t hd = tab[a + 10];
    const uint32_t q_w = tab[a + 11];
    const uint32_t kv_w = tab[a + 12];
    const uint32_t group = tab[a + 14];
    const bool causal = tab[a + 15] != 0;
    if (const uint32_t wait = tab[a + 13]; wait > 0) {
        noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), wait);
    }
    constexpr auto q_args = TensorAccessorArgs<TABLE_CTA_END>();
    constexpr auto k_args = TensorAccessorArgs<q_args.next_compile_time_args_offset()>();
    constexpr auto v_args = TensorAccessorArgs<k_args.next_compile_time_args_offset()>();
    constexpr auto s_args = TensorAccessorArgs<v_args.next_compile_time_args_offset()>();
    constexpr auto m_args = TensorAccessorArgs<s_args.next_compile_time_args_offset()>();
    const auto q = TensorAccessor(q_args, q_addr);
    const auto k = TensorAccessor(k_args, k_addr);
    const auto v = TensorAccessor(v_args, v_addr);
    const auto s = TensorAccessor(s_args, s_addr);
    const auto m = TensorAccessor(m_args, m_addr);
    const uint32_t fpage = get_local_cb_interface(cb_scaler).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_q(cb_q), dfb_s(cb_scaler), dfb_k(cb_k), dfb_v(cb_v), dfb_m(cb_mask);
    DataflowBuffer dfb_zero(cb_zero), dfb_scratch(cb_scratch);
    const uint32_t zero_l1 = dfb_zero.get_write_ptr();
    const uint32_t scratch_l1 = dfb_scratch.get_write_ptr();
    volatile uint32_t* z = reinterpret_cast<volatile uint32_t*>(zero_l1);
    for (uint32_t i = 0; i < 2048 / 4; ++i) {
        z[i] = 0;
    }
    dfb_s.reserve_back(1);
    noc.async_read(s, dfb_s, fpage, {.page_id = 0}, {.offset_bytes = 0});
    dfb_m.reserve_back(nt);
    for (uint32_t j = 0; j < nt; ++j) {
        noc.async_read(m, dfb_m, fpage, {.page_id = j}, {.offset_bytes = j * fpage});
    }
    noc.async_read_barrier();
    dfb_s.push_back(1);
    if (causal) {
        // From the mask tiles still in this kernel's hands (not yet pushed).
        const uint32_t nd = mt < nt ? mt : nt;
        DataflowBuffer dfb_d(cb_diag);
        dfb_d.reserve_back(nd);
        diagonal_masks(dfb_m.get_write_ptr(), dfb_d.get_write_ptr(), nd, fpage);
        dfb_d.push_back(nd);
    }
    dfb_m.push_back(nt);
    for (uint32_t h = first_head; h < first_head + heads; ++h) {
        dfb_q.reserve_back(mt * dt);
        gather_head(q, q_w, mt, h, hd, dt, dfb_q.get_write_ptr(), zero_l1, scratch_l1);
        dfb_q.push_back(mt * dt);
        dfb_k.reserve_back(nt * dt);
        gather_head(k, kv_w, nt, h / group, hd, dt, dfb_k.get_write_ptr(), zero_l1, scratch_l1);
        dfb_k.push_back(nt * dt);
        dfb_v.reserve_back(nt * dt);
        gather_head(v, kv_w, nt, h / group, hd, dt, dfb_v.get_write_ptr(), zero_l1, scratch_l1);
        dfb_v.push_back(nt * dt);
    }
}

void kernel_main() {
    const TaskTable<30> t;
    for (uint32_t task = 0, tasks = t[0]; task < tasks; ++task) {
        read_task(t, 1 + task * 16);
    }
}
