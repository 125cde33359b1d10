// SPDX-License-Identifier: Apache-2.0
// Writer of attention_head.cpp (RISCV_0): the per-head output tiles (CB 16: per head of this core, its
// mt x dt tiles, tile row by tile row) put back into the [rows, heads * hd] layout the output projection
// reads, in L1, on the way out: the head merge is part of the write, not a program of its own. Head h's
// columns 0 .. hd land at columns h*hd .. h*hd + hd.
//
// A tile of the output may hold columns of several heads (hd = 10), so the host gives each core a run of
// heads whose columns start and end on tile boundaries (or the tensor's end), and the core owns those
// output tiles whole: it assembles them in CB 17 (zero-filled first: padding columns stay 0), then writes
// them. Columns move face by face (a local NoC read per 16 x 16 face) when hd and the head's first column
// are whole faces, else element by element in the tile's face order.
// A task per attention of a chain this core takes part in (graph.rs), or the one of a program of its own.
// Its task table (task_table.h, CB 31): tasks; per task 10 words: output address; first head; heads; mt;
// dt; hd; the output's width (tiles); this core's first output tile column; its tile columns; the cores to
// signal when the output is written (0: none; the output projection's, in the same program), then each
// one's NOC x and y (16-bit halves, x low). Compile-time args after the table's: the output's accessor
// args (every task's output is alike).
// CBs: 16 the compute kernel's output (bf16), 17 the assembly (mt * tile columns bf16 pages).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@

//@@GR00T_TILE_COLUMNS@@
//@@GR00T_CB_IDS writer_merge_heads.cpp@@

template <typename Table>
void write_task(const Table& tab, uint32_t a) {
    const uint32_t addr = tab[a + 0];
    const uint32_t first_head = tab[a + 1];
    const uint32_t heads = tab[a + 2];
    const uint32_t mt = tab[a + 3];
    const uint32_t dt = tab[a + 4];
    const uint32_t hd = tab[a + 5];
    const uint32_t out_w = tab[a + 6];
    const uint32_t c0 = tab[a + 7];
    const uint32_t cw = tab[a + 8];
    constexpr uint32_t page = 2048, face = page / 4;
    constexpr auto args = TensorAccessorArgs<TABLE_CTA_END>();
    const auto dst = TensorAccessor(args, addr);
    DataflowBuffer dfb_o(cb_o), dfb_asm(cb_asm);
    const uint32_t asm_l1 = dfb_asm.get_write_ptr();
    const auto here = [](uint32_t l1) { return get_noc_addr(my_x[noc_index], my_y[noc_index], l1); };

    // Zero the assembly: one page by stores, copied over the others by the NoC.
    volatile uint32_t* z = reinterpret_cast<volatile uint32_t*>(asm_l1);
    for (uint32_t i = 0; i < page / 4; ++i) {
        z[i] = 0;
    }
    for (uint32_t t = 1; t < mt * cw; ++t) {
        noc_async_read(here(asm_l1), asm_l1 + t * page, page);
    }
    noc_async_read_barrier();
    for (uint32_t h = first_head; h < first_head + heads; ++h) {
        const uint32_t col = h * hd - c0 * 32;  // the head's first column in the assembly
        const bool faces = ((col | hd) & 15) == 0;
        for (uint32_t i = 0; i < mt; ++i) {
            const uint32_t dbase = asm_l1 + i * cw * page;
            for (uint32_t j = 0; j < dt; ++j) {
                dfb_o.wait_front(1);
                const uint32_t sp = dfb_o.get_read_ptr();
                const uint32_t end = (j + 1) * 32 < hd ? (j + 1) * 32 : hd;
                if (faces) {
                    for (uint32_t g = j * 32; g < end; g += 16) {
                        const uint32_t d = col + g;
                        for (uint32_t half = 0; half < 2; ++half) {
                            noc_async_read(here(sp + (half * 2 + ((g >> 4) & 1)) * face),
                                           dbase + (d >> 5) * page + (half * 2 + ((d >> 4) & 1)) * face, face);
                        }
                    }
                    noc_async_read_barrier();
                } else {
                    copy_columns(sp, 0, dbase, col + j * 32, end - j * 32);
                }
                dfb_o.pop_front(1);
            }
        }
    }
    for (uint32_t i = 0; i < mt; ++i) {
        for (uint32_t t = 0; t < cw; ++t) {
            noc_async_write_page(i * out_w + c0 + t, dst, asm_l1 + (i * cw + t) * page);
        }
    }
    noc_async_write_barrier();
    // The output projection reads this in the same program (graph.rs): tell each of its cores.
    signal_cores(tab, a + 10, tab[a + 9]);
}

void kernel_main() {
    const TaskTable<31> t;
    for (uint32_t task = 0, tasks = t[0], a = 1; task < tasks; ++task) {
        write_task(t, a);
        a += 10 + t[a + 9];
    }
}
