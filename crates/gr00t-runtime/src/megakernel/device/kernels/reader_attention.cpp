// SPDX-License-Identifier: Apache-2.0
// Reader of attention_head.cpp (RISCV_1): once, the reduce scaler tile (CB 1) and the key mask (CB 5,
// nt fp32 tiles, the mask in row 0); then, per head of this core, its Q tiles (CB 0, mt*dt) and its K and V
// tiles (CBs 2 and 3, nt*dt each), from [heads * rows, dp] bf16 TILE tensors (head h's tiles are the
// contiguous pages h*rows_tiles*dt ..). Runtime args: q, k, v, scaler, mask addresses; first head; heads;
// mt; nt; dt. Compile-time args: the five tensors' accessor args, in that order.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

void kernel_main() {
    const uint32_t q_addr = get_arg_val<uint32_t>(0);
    const uint32_t k_addr = get_arg_val<uint32_t>(1);
    const uint32_t v_addr = get_arg_val<uint32_t>(2);
    const uint32_t s_addr = get_arg_val<uint32_t>(3);
    const uint32_t m_addr = get_arg_val<uint32_t>(4);
    const uint32_t first_head = get_arg_val<uint32_t>(5);
    const uint32_t heads = get_arg_val<uint32_t>(6);
    const uint32_t mt = get_arg_val<uint32_t>(7);
    const uint32_t nt = get_arg_val<uint32_t>(8);
    const uint32_t dt = get_arg_val<uint32_t>(9);
    constexpr uint32_t cb_q = 0, cb_scaler = 1, cb_k = 2, cb_v = 3, cb_mask = 5;
    constexpr auto q_args = TensorAccessorArgs<0>();
    constexpr auto k_args = TensorAccessorArgs<q_args.next_compile_time_args_offset()>();
    constexpr auto v_args = TensorAccessorArgs<k_args.next_compile_time_args_offset()>();
    constexpr auto s_args = TensorAccessorArgs<v_args.next_compile_time_args_offset()>();
    constexpr auto m_args = TensorAccessorArgs<s_args.next_compile_time_args_offset()>();
    const auto q = TensorAccessor(q_args, q_addr);
    const auto k = TensorAccessor(k_args, k_addr);
    const auto v = TensorAccessor(v_args, v_addr);
    const auto s = TensorAccessor(s_args, s_addr);
    const auto m = TensorAccessor(m_args, m_addr);
    const uint32_t bpage = get_local_cb_interface(cb_q).fifo_page_size;
    const uint32_t fpage = get_local_cb_interface(cb_scaler).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_q(cb_q), dfb_s(cb_scaler), dfb_k(cb_k), dfb_v(cb_v), dfb_m(cb_mask);
    dfb_s.reserve_back(1);
    noc.async_read(s, dfb_s, fpage, {.page_id = 0}, {.offset_bytes = 0});
    dfb_m.reserve_back(nt);
    for (uint32_t j = 0; j < nt; ++j) {
        noc.async_read(m, dfb_m, fpage, {.page_id = j}, {.offset_bytes = j * fpage});
    }
    noc.async_read_barrier();
    dfb_s.push_back(1);
    dfb_m.push_back(nt);
    for (uint32_t h = first_head; h < first_head + heads; ++h) {
        dfb_q.reserve_back(mt * dt);
        for (uint32_t t = 0; t < mt * dt; ++t) {
            noc.async_read(q, dfb_q, bpage, {.page_id = h * mt * dt + t}, {.offset_bytes = t * bpage});
        }
        noc.async_read_barrier();
        dfb_q.push_back(mt * dt);
        dfb_k.reserve_back(nt * dt);
        dfb_v.reserve_back(nt * dt);
        for (uint32_t t = 0; t < nt * dt; ++t) {
            noc.async_read(k, dfb_k, bpage, {.page_id = h * nt * dt + t}, {.offset_bytes = t * bpage});
            noc.async_read(v, dfb_v, bpage, {.page_id = h * nt * dt + t}, {.offset_bytes = t * bpage});
        }
        noc.async_read_barrier();
        dfb_k.push_back(nt * dt);
        dfb_v.push_back(nt * dt);
    }
}
