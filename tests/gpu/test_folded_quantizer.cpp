// GEMM1's input quantizer folded into the first routing kernel (cuda/folded_quantizer.hpp):
// its codes (or values) and scales equal the quantizer's own launch byte for byte, and the
// routing's outputs equal those of the routing without it, on every routing path (fused, count +
// scatter, chunked), for align and permute, every format, both dtypes, codes and values out. The same for the
// MMA-order copy of 16-bit rows folded there (fold_order_rows).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/elementwise.hpp"
#include "cuda/folded_quantizer.hpp"
#include "cuda/routing.hpp"
#include "moeq/error.hpp"
#include "reference/quantize.hpp"
#include "tests/gpu/quantizer_test_util.hpp"

namespace {

namespace cu = moeq::cuda;
using moeq::ActFormat;
using moeq::DType;
using moeq::test::download;
using moeq::test::expect_guard_intact;
using moeq::test::poisoned;
using moeq::test::quantize_input;

#define SKIP_WITHOUT_DEVICE() \
  if (cu::device_count() == 0) GTEST_SKIP() << "no CUDA device"

const char* name_of(cu::RoutingPath path) {
  switch (path) {
    case cu::RoutingPath::kFused: return "fused";
    case cu::RoutingPath::kTwoKernel: return "two-kernel";
    case cu::RoutingPath::kChunked: return "chunked";
    default: return "auto";
  }
}

// One quantizer problem (x [rows, cols] at `stride`) and one routing problem of `rows` tokens.
struct Case {
  DType dtype;
  ActFormat format;
  bool values_out;
  int64_t rows, cols, stride;
  bool mma_order = false;  // in the MMA's K order (a `/t` GEMM's input: 16-bit values, or FP8 per-token codes)
  std::string label() const {
    return std::string(moeq::to_string(format)) + " " + std::string(moeq::to_string(dtype)) +
           (values_out ? " values" : " codes") + (mma_order ? " in MMA order" : "") + " rows " + std::to_string(rows) +
           " cols " + std::to_string(cols) + " stride " + std::to_string(stride);
  }
};

struct Outputs {
  std::vector<uint8_t> codes, scales;
  std::vector<std::vector<uint8_t>> routing;
};

// The quantizer's outputs (folded into the routing, or its own launch after the routing) and the
// routing's (align when `align`, else permute indices), all from poisoned buffers.
Outputs run(const Case& c, bool align, cu::RoutingPath path, bool folded, const cu::DeviceBuffer& x,
            const cu::DeviceBuffer& ids, cu::CUstream stream) {
  constexpr int64_t kTopK = 4, kExperts = 12, kBlockM = 16;
  const int64_t slots = c.rows * kTopK;
  const size_t code_bytes = c.values_out ? static_cast<size_t>(c.rows * c.cols * 2)
                                         : static_cast<size_t>(moeq::ref::act_code_bytes(c.format, c.rows, c.cols));
  const size_t scale_bytes = static_cast<size_t>(moeq::ref::act_scale_bytes(c.format, c.rows, c.cols));
  cu::DeviceBuffer codes = poisoned(code_bytes), scales = poisoned(scale_bytes);
  const cu::RouteIds route{ids.ptr(), DType::i32, c.rows, kTopK, kExperts, 0, kExperts, 0};
  const int64_t capacity = cu::align_capacity(slots, kExperts, kBlockM);
  std::vector<cu::DeviceBuffer> bufs;
  for (const int64_t bytes : {slots * 4, capacity * 4, capacity / kBlockM * 4, int64_t{4},
                              cu::route_chunk_counts_elems(slots, kExperts) * 4, (kExperts + 1) * 8, slots * 4})
    bufs.push_back(poisoned(static_cast<size_t>(bytes)));
  cu::FoldedQuantizer fold;
  if (folded)
    fold = cu::fold_quantizer(c.format, c.dtype, x.ptr(), c.stride, c.rows, c.cols, codes.ptr(), scales.ptr(),
                              c.values_out, cu::kRouteFirstKernelThreads, c.mma_order);
  if (align) {
    cu::AlignOutputs out{bufs[0].ptr(), bufs[1].ptr(), bufs[2].ptr(), bufs[3].ptr(), bufs[4].ptr()};
    out.quantizer = fold;
    cu::map_and_align(route, kBlockM, out, stream, path);
  } else {
    cu::PermuteOutputs out{bufs[0].ptr(), bufs[5].ptr(), bufs[1].ptr(), bufs[6].ptr(), bufs[4].ptr()};
    out.quantizer = fold;
    cu::permute_indices(route, out, stream, path);
  }
  if (!folded) {
    if (c.values_out) {
      cu::quantize_activation_values(c.format, c.dtype, x.ptr(), c.stride, c.rows, c.cols, codes.ptr(), scales.ptr(),
                                     stream, c.mma_order);
    } else {
      cu::quantize_activation(c.format, c.dtype, x.ptr(), c.stride, c.rows, c.cols, codes.ptr(), scales.ptr(), stream,
                              c.mma_order);
    }
  }
  cu::check(cu::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  Outputs o{download(codes), download(scales), {}};
  expect_guard_intact(o.codes, code_bytes, c.label() + " codes");
  expect_guard_intact(o.scales, scale_bytes, c.label() + " scales");
  for (size_t i = 0; i < bufs.size(); ++i)
    if (i != 4) o.routing.push_back(download(bufs[i]));  // the chunk scratch is not an output
  return o;
}

TEST(FoldedQuantizerGpu, EqualsTheQuantizersOwnLaunchOnEveryRoutingPath) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  // rows 1: the fused path's size; 7: odd; 129: count + scatter; 1600 (6400 slots): the chunked
  // path's size. cols 2048 / 2880: the 16-byte path; stride cols + 3: the scalar path; 7168 / 5120:
  // rows longer than the folded FP8 per-token quantizer's 2 slots a lane hold (several passes).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 2048},    {7, 2880},  {129, 2048},
                                                           {1600, 2048}, {7, 7168}, {129, 5120}};
  int seed = 0;
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const ActFormat format : {ActFormat::fp8_token, ActFormat::mxfp8, ActFormat::mxfp4})
      for (const int out_kind : {0, 1, 2, 3})  // codes, values, values in the MMA's K order, codes in it (FP8 per token)
        for (const auto& [rows, cols] : shapes)
          for (const int64_t pad : {int64_t{0}, int64_t{3}}) {
            if (pad != 0 && rows > 129) continue;
            if (out_kind == 2 && (rows == 1600 || format == ActFormat::mxfp8)) continue;  // the order is the sink's alone
            if (out_kind == 3 && (rows == 1600 || format != ActFormat::fp8_token || cols % 128 != 0)) continue;
            const Case c{dtype, format, out_kind == 1 || out_kind == 2, rows, cols, cols + pad, out_kind >= 2};
            const cu::DeviceBuffer x = cu::DeviceBuffer::from_host(
                quantize_input(dtype, rows, c.stride, cols, static_cast<uint32_t>(++seed)));
            std::mt19937 rng(static_cast<uint32_t>(seed));
            std::vector<int32_t> ids(static_cast<size_t>(rows * 4));
            for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 13) - 1;  // -1 .. 11: some unrouted
            const cu::DeviceBuffer d_ids = cu::DeviceBuffer::from_host(ids);
            for (const bool align : {true, false})
              for (const cu::RoutingPath path :
                   {cu::RoutingPath::kAuto, cu::RoutingPath::kFused, cu::RoutingPath::kTwoKernel,
                    cu::RoutingPath::kChunked}) {
                const std::string what = c.label() + (align ? " align " : " permute ") + name_of(path);
                const Outputs want = run(c, align, path, false, x, d_ids, stream.get());
                const Outputs got = run(c, align, path, true, x, d_ids, stream.get());
                EXPECT_EQ(got.codes, want.codes) << what << ": codes differ";
                EXPECT_EQ(got.scales, want.scales) << what << ": scales differ";
                for (size_t i = 0; i < want.routing.size(); ++i)
                  EXPECT_EQ(got.routing[i], want.routing[i]) << what << ": routing output " << i << " differs";
              }
          }
}

// The MMA-order copy folded into the same launches (fold_order_rows: a 16-bit layer's GEMM1 input on a `/t` tile)
// equals order_rows_for_mma's own launch byte for byte, and the routing's outputs are those without it, on every path.
TEST(FoldedQuantizerGpu, FoldedOrderRowsEqualTheOrderPassOnEveryRoutingPath) {
  SKIP_WITHOUT_DEVICE();
  cu::Stream stream;
  constexpr int64_t kTopK = 4, kExperts = 12, kBlockM = 16;
  // rows 1: fused; 7: odd; 129: count + scatter; 1600: chunked. cols 2880 = 45 tiles of 64 (gpt-oss-120b), stride
  // cols + 2: a padded row (even, as the pass needs).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 2048}, {7, 2880}, {129, 2048}, {1600, 2880}};
  int seed = 100;
  for (const DType dtype : {DType::bf16, DType::f16})
    for (const auto& [rows, cols] : shapes)
      for (const int64_t stride : {cols, cols + 2}) {
        const cu::DeviceBuffer x =
            cu::DeviceBuffer::from_host(quantize_input(dtype, rows, stride, cols, static_cast<uint32_t>(++seed)));
        std::mt19937 rng(static_cast<uint32_t>(seed));
        std::vector<int32_t> ids(static_cast<size_t>(rows * kTopK));
        for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 13) - 1;
        const cu::DeviceBuffer d_ids = cu::DeviceBuffer::from_host(ids);
        const cu::RouteIds route{d_ids.ptr(), DType::i32, rows, kTopK, kExperts, 0, kExperts, 0};
        const int64_t slots = rows * kTopK, capacity = cu::align_capacity(slots, kExperts, kBlockM);
        const size_t ordered_bytes = static_cast<size_t>(rows * cols * 2);
        for (const cu::RoutingPath path :
             {cu::RoutingPath::kAuto, cu::RoutingPath::kFused, cu::RoutingPath::kTwoKernel, cu::RoutingPath::kChunked}) {
          const std::string what = std::string(moeq::to_string(dtype)) + " rows " + std::to_string(rows) + " cols " +
                                   std::to_string(cols) + " stride " + std::to_string(stride) + " " + name_of(path);
          Outputs o[2];
          for (const bool folded : {false, true}) {
            cu::DeviceBuffer ordered = poisoned(ordered_bytes);
            std::vector<cu::DeviceBuffer> bufs;
            for (const int64_t bytes : {slots * 4, capacity * 4, capacity / kBlockM * 4, int64_t{4},
                                        cu::route_chunk_counts_elems(slots, kExperts) * 4})
              bufs.push_back(poisoned(static_cast<size_t>(bytes)));
            cu::AlignOutputs out{bufs[0].ptr(), bufs[1].ptr(), bufs[2].ptr(), bufs[3].ptr(), bufs[4].ptr()};
            if (folded)
              out.quantizer = cu::fold_order_rows(dtype, x.ptr(), stride, rows, cols, ordered.ptr(),
                                                  cu::kRouteFirstKernelThreads);
            cu::map_and_align(route, kBlockM, out, stream.get(), path);
            if (!folded) cu::order_rows_for_mma(x.ptr(), stride, rows, cols, ordered.ptr(), cols, stream.get());
            cu::check(cu::driver().cuStreamSynchronize(stream.get()), "cuStreamSynchronize");
            o[folded].codes = download(ordered);
            expect_guard_intact(o[folded].codes, ordered_bytes, what + " ordered rows");
            for (size_t i = 0; i < bufs.size(); ++i)
              if (i != 4) o[folded].routing.push_back(download(bufs[i]));
          }
          EXPECT_EQ(o[1].codes, o[0].codes) << what << ": ordered rows differ";
          for (size_t i = 0; i < o[0].routing.size(); ++i)
            EXPECT_EQ(o[1].routing[i], o[0].routing[i]) << what << ": routing output " << i << " differs";
        }
      }
}

// The fold is checked as the quantizer's own launch is: a bad argument throws before anything runs.
// Host checks only (no device needed): the addresses are never dereferenced.
TEST(FoldedQuantizerGpu, BadArgumentsThrowAsTheQuantizersDo) {
  struct {
    cu::CUdeviceptr ptr() const { return 0x10000; }
  } buf;
  EXPECT_THROW(cu::fold_quantizer(ActFormat::mxfp8, DType::bf16, buf.ptr(), 48, 2, 48, buf.ptr(), buf.ptr(), false,
                                  cu::kRouteFirstKernelThreads),
               moeq::Error);  // cols not a multiple of 32
  EXPECT_THROW(cu::fold_quantizer(ActFormat::fp8_token, DType::f32, buf.ptr(), 64, 2, 64, buf.ptr(), buf.ptr(), false,
                                  cu::kRouteFirstKernelThreads),
               moeq::Error);  // not a 16-bit input
  EXPECT_THROW(cu::fold_quantizer(ActFormat::fp8_token, DType::bf16, 0, 64, 2, 64, buf.ptr(), buf.ptr(), false,
                                  cu::kRouteFirstKernelThreads),
               moeq::Error);  // null input
  EXPECT_FALSE(cu::fold_quantizer(ActFormat::fp8_token, DType::bf16, 0, 64, 0, 64, 0, 0, false,
                                  cu::kRouteFirstKernelThreads)
                   .active());  // no rows: nothing folded
  EXPECT_THROW(cu::fold_order_rows(DType::bf16, buf.ptr(), 96, 2, 96, buf.ptr() + 4096, cu::kRouteFirstKernelThreads),
               moeq::Error);  // cols not a multiple of 64
  EXPECT_THROW(cu::fold_order_rows(DType::bf16, buf.ptr(), 129, 2, 128, buf.ptr() + 4096, cu::kRouteFirstKernelThreads),
               moeq::Error);  // odd row stride
  EXPECT_THROW(cu::fold_order_rows(DType::f32, buf.ptr(), 128, 2, 128, buf.ptr() + 4096, cu::kRouteFirstKernelThreads),
               moeq::Error);  // not 16-bit rows
  EXPECT_FALSE(cu::fold_order_rows(DType::bf16, 0, 128, 0, 128, 0, cu::kRouteFirstKernelThreads).active());
}

}  // namespace
