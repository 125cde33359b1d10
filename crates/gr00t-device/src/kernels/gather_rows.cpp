// SPDX-License-Identifier: Apache-2.0
// Reader of the LLM's input rows (Qwen3's inputs_embeds; RISCV_1): output row t is the source row of token t,
// read from one of two tensors by the forward's ids tensor, rows at or past the token count zero. The rows go
// out as whole fp32 tile rows into CB 0 (Wt tiles each), which pass_rows.cpp hands on to writer_tiles.cpp.
//   * the ids: an fp32 TILE tensor [32, 32 * ceil(n / 32)], row 0 holding per token v >= 0 (row v of the
//     token-embedding table) or v < 0 (row -v - 1 of the image rows); exact integers below 2^24;
//   * the table: bf16 TILE [vocab padded to 32, 32 Wt] (its values widened to fp32 by a 16-bit shift);
//   * the image rows: fp32 TILE [32 * k, 32 Wt] (the projector's output, copied bit for bit).
// A source row lives in one half of each of its Wt tiles (rows 0-15 in faces 0 and 1, 16-31 in faces 2
// and 3, each half contiguous): per token and column tile only that half is read, into the scratch CB,
// and the row's 32 values copied from it into the output tile's row. Per tile row of output this core
// takes, per chunk of C column tiles (C: what the scratch CB holds, 32 tokens * C half-tile slots of
// 2 KB), every token's reads are in flight together, then one barrier, then the copies.
// An id that decodes to no integer below 2^24 gives a zero row (the host builds the ids: gather.rs).
// Rows past the tensors' ends are not checked here: the host checks its tokens (gather.rs).
// Its task table (task_table.h, CB 30) is reader_rows.cpp's, so the worker's row program builds it the
// same way (a RowsStep; gather.rs): tasks; per task 11 words: the table, ids, image and (unused) b
// addresses; Wt; first tile row; tile rows; (unused); (unused); the token count n; the count of semaphore 0
// to wait for (0: none). Compile-time args after the table's: the four tensors' accessor args, in that
// order. CBs: 0 the output rows (fp32, Wt pages or more), 1 the ids' half tile (fp32, 1 page), 2 the
// scratch (fp32 pages, 16 per column tile of a chunk).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@

//@@GR00T_TILE_COLUMNS@@
//@@GR00T_CB_IDS gather_rows.cpp@@

namespace {
// Bytes of a half tile: the table's (bf16) and the image rows' and ids' (fp32); a scratch slot holds one.
constexpr uint32_t TABLE_HALF = 1024, F32_HALF = 2048, SLOT = F32_HALF;

// Where a token's row comes from.
struct Source {
    bool real;   // false: a zero row (past the tokens, or an id that is no integer)
    bool image;  // the image rows, else the table
    uint32_t row;
};

// The source an ids value (its f32 bits) names, decoded in integer arithmetic (the data-movement cores
// have no FPU; the compiler's soft float would do, but this is a few shifts).
inline Source decode(uint32_t bits) {
    const uint32_t mag = bits & 0x7fffffffu;
    if (mag == 0) {
        return {true, false, 0};
    }
    const int32_t e = static_cast<int32_t>(mag >> 23) - 127;
    if (e < 0 || e > 23) {
        return {false, false, 0};  // |v| < 1 (not an integer) or >= 2^24 (not exact), Inf, NaN
    }
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u, shift = 23 - static_cast<uint32_t>(e);
    if ((m & ((1u << shift) - 1)) != 0) {
        return {false, false, 0};  // a fraction
    }
    const uint32_t v = m >> shift;
    return (bits >> 31) != 0 ? Source{true, true, v - 1} : Source{true, false, v};
}

// Row q (0-15) of a half tile at `half` to row `i` of the fp32 tile at `tile`: its columns 0-15 (the half's
// first face) and 16-31 (the second), each 16 contiguous values on both sides. bf16 values are widened by
// a 16-bit shift (two to a word: the lower half is the even column).
inline void copy_row(uint32_t half, bool bf16, uint32_t q, uint32_t tile, uint32_t i) {
    volatile uint32_t* dst = reinterpret_cast<volatile uint32_t*>(tile);
    volatile uint32_t* src = reinterpret_cast<volatile uint32_t*>(half);
    for (uint32_t f = 0; f < 2; ++f) {
        volatile uint32_t* d = dst + tile_offset(i, f * 16);
        if (bf16) {
            volatile uint32_t* s = src + (f * 256 + q * 16) / 2;
            for (uint32_t k = 0; k < 8; ++k) {
                const uint32_t w = s[k];
                d[2 * k] = w << 16;
                d[2 * k + 1] = w & 0xffff0000u;
            }
        } else {
            volatile uint32_t* s = src + f * 256 + q * 16;
            for (uint32_t k = 0; k < 16; ++k) {
                d[k] = s[k];
            }
        }
    }
}

inline void zero_row(uint32_t tile, uint32_t i) {
    volatile uint32_t* dst = reinterpret_cast<volatile uint32_t*>(tile);
    for (uint32_t f = 0; f < 2; ++f) {
        volatile uint32_t* d = dst + tile_offset(i, f * 16);
        for (uint32_t k = 0; k < 16; ++k) {
            d[k] = 0;
        }
    }
}
}  // namespace

template <typename Table>
void read_task(const Table& tab, uint32_t a, DataflowBuffer& dfb_ids, DataflowBuffer& dfb_scratch,
               uint32_t chunk) {
    const uint32_t table_addr = tab[a + 0];
    const uint32_t ids_addr = tab[a + 1];
    const uint32_t image_addr = tab[a + 2];
    const uint32_t wt_count = tab[a + 4];
    const uint32_t first_row = tab[a + 5];
    const uint32_t row_tiles = tab[a + 6];
    const uint32_t n = tab[a + 9];
    if (const uint32_t wait = tab[a + 10]; wait > 0) {
        noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), wait);
    }
    constexpr auto t_args = TensorAccessorArgs<TABLE_CTA_END>();
    constexpr auto s_args = TensorAccessorArgs<t_args.next_compile_time_args_offset()>();
    constexpr auto g_args = TensorAccessorArgs<s_args.next_compile_time_args_offset()>();
    const auto table = TensorAccessor(t_args, table_addr);
    const auto ids = TensorAccessor(s_args, ids_addr);
    const auto image = TensorAccessor(g_args, image_addr);
    const uint32_t page = get_local_cb_interface(cb_x).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_x(cb_x);
    const uint32_t scratch = dfb_scratch.get_write_ptr();
    volatile uint32_t* id_words = reinterpret_cast<volatile uint32_t*>(dfb_ids.get_write_ptr());

    for (uint32_t r = first_row; r < first_row + row_tiles; ++r) {
        // Tokens 32 r .. 32 r + 31: row 0 of the ids' tile r, which lies in the tile's first half.
        noc.async_read(ids, dfb_ids, F32_HALF, {.page_id = r, .offset_bytes = 0}, {.offset_bytes = 0});
        noc.async_read_barrier();
        Source src[32];
        for (uint32_t i = 0; i < 32; ++i) {
            src[i] = 32 * r + i < n ? decode(id_words[tile_offset(0, i)]) : Source{false, false, 0};
        }
        dfb_x.reserve_back(wt_count);
        const uint32_t out = dfb_x.get_write_ptr();
        for (uint32_t c0 = 0; c0 < wt_count; c0 += chunk) {
            const uint32_t cn = wt_count - c0 < chunk ? wt_count - c0 : chunk;
            for (uint32_t i = 0; i < 32; ++i) {
                if (!src[i].real) {
                    continue;
                }
                const uint32_t base = (src[i].row >> 5) * wt_count + c0, h = (src[i].row >> 4) & 1;
                for (uint32_t j = 0; j < cn; ++j) {
                    const uint32_t at = (i * chunk + j) * SLOT, p = base + j;
                    if (src[i].image) {
                        noc.async_read(image, dfb_scratch, F32_HALF, {.page_id = p, .offset_bytes = h * F32_HALF},
                                       {.offset_bytes = at});
                    } else {
                        noc.async_read(table, dfb_scratch, TABLE_HALF, {.page_id = p, .offset_bytes = h * TABLE_HALF},
                                       {.offset_bytes = at});
                    }
                }
            }
            noc.async_read_barrier();
            for (uint32_t i = 0; i < 32; ++i) {
                for (uint32_t j = 0; j < cn; ++j) {
                    const uint32_t tile = out + (c0 + j) * page;
                    if (src[i].real) {
                        copy_row(scratch + (i * chunk + j) * SLOT, !src[i].image, src[i].row & 15, tile, i);
                    } else {
                        zero_row(tile, i);
                    }
                }
            }
        }
        dfb_x.push_back(wt_count);
    }
}

void kernel_main() {
    const TaskTable<30> t;
    // The ids' and the scratch CBs are this kernel's alone: reserved once, never pushed.
    DataflowBuffer dfb_ids(cb_ids), dfb_scratch(cb_scratch);
    const uint32_t scratch_pages = get_local_cb_interface(cb_scratch).fifo_num_pages;
    const uint32_t chunk = scratch_pages * get_local_cb_interface(cb_scratch).fifo_page_size / (32 * SLOT);
    dfb_ids.reserve_back(1);
    dfb_scratch.reserve_back(scratch_pages);
    for (uint32_t task = 0, tasks = t[0]; task < tasks; ++task) {
        read_task(t, 1 + task * 11, dfb_ids, dfb_scratch, chunk);
    }
}
