// SPDX-License-Identifier: Apache-2.0
// A data-movement kernel's task table (pasted in at the marker line `//@@GR00T_TASK_TABLE@@` by the host, as
// the tile geometry is): the kernel's work as words in DRAM rather than in runtime args, since tt-metal takes
// at most 341 of those a kernel a core and one program for a whole denoising step gives a matmul core some
// thousand (a job's five words, for every matmul of every block). Runtime args: the table tensor's address,
// this kernel's row of it on this core. Compile-time args: the table's accessor args come first
// (TABLE_CTA_END is where the kernel's own begin). The row, one page of an interleaved uint32 ROW_MAJOR
// tensor, is read once into the L1 of CB `CB` (one page of the row's size) and read from there.
namespace {
constexpr auto table_args = TensorAccessorArgs<0>();
constexpr uint32_t TABLE_CTA_END = table_args.next_compile_time_args_offset();

template <uint32_t CB>
class TaskTable {
public:
    TaskTable() {
        DataflowBuffer dfb(CB);
        const uint32_t l1 = dfb.get_write_ptr();
        const uint32_t row_bytes = get_local_cb_interface(CB).fifo_page_size;
        const auto table = TensorAccessor(table_args, get_arg_val<uint32_t>(0), row_bytes);
        noc_async_read_page(get_arg_val<uint32_t>(1), table, l1);
        noc_async_read_barrier();
        words_ = reinterpret_cast<volatile tt_l1_ptr uint32_t*>(l1);
    }
    uint32_t operator[](uint32_t i) const { return words_[i]; }

private:
    volatile tt_l1_ptr uint32_t* words_;
};

// After a task: once every write is acknowledged, increments semaphore 0 of each of the n cores whose NOC x
// and y (16-bit halves, x low) are t[a] .. t[a + n - 1]: the next phase of a chain, whose readers wait for it.
template <typename Table>
inline void signal_cores(const Table& t, uint32_t a, uint32_t n) {
    if (n == 0) {
        return;
    }
    noc_async_write_barrier();
    for (uint32_t e = 0; e < n; ++e) {
        const uint32_t xy = t[a + e];
        noc_semaphore_inc(get_noc_addr(xy & 0xffff, xy >> 16, get_semaphore(0)), 1);
    }
    noc_async_atomic_barrier();
}
}  // namespace
