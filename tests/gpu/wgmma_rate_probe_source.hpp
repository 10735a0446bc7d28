#pragma once
#include <string>

// The wgmma rate probe (tests/gpu/test_fp8_mma.cpp runs it; tests/jit/test_fp8_mma_jit.cpp compiles it for sm_90a):
// each warpgroup of every CTA issues groups of m64n128 wgmmas into one accumulator set, a group's MMAs cover 128 k
// (4 e4m3 k32 or 8 bf16 k16), every group committed and the one before waited for (wait_group 1), as the e4m3 GEMM
// consumers do. A (registers or shared memory) and B (shared memory, 128-byte swizzle) hold ones, so each
// accumulator ends at 128 x iterations (e4m3: within its MMAs' own accumulation), and the time gives the rate of the
// MMAs alone.
// Entries: moeq_test_wgmma_rate_{e4m3_rs, e4m3_ss, bf16_rs, e4m3_rs_fresh, bf16_rs_fresh}(float* out, int iterations); out[2 block + warpgroup]
// = that warpgroup's thread 0's first accumulator. Dynamic shared memory: 8 KB of A, then 32 KB of B (1024-aligned).
namespace moeq::test {

// Both probes' common part: the wgmma header and an m64n128k32 e4m3 wgmma with A from shared memory (SS), which
// the library does not wrap.
inline constexpr const char* kWgmmaProbeCommonSource = R"(#include "moeq_dev/ptx/wgmma.cuh"
namespace {
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_ss(float (&d)[64], unsigned long long a, unsigned long long b) {
#if MOEQ_WGMMA_AVAILABLE
  asm volatile(
      "{ wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b));
#else
  __trap();
#endif
}
}  // namespace
)";

inline const std::string kWgmmaRateProbeSource = std::string(kWgmmaProbeCommonSource) + R"(namespace {
enum class Kind { kE4m3Rs, kE4m3Ss, kBf16Rs, kE4m3RsFresh, kBf16RsFresh };

template <Kind kKind>
__device__ void wgmma_rate(float* out, int iterations) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned one = (kKind == Kind::kBf16Rs || kKind == Kind::kBf16RsFresh) ? 0x3F803F80u : 0x38383838u;  // bf16 1.0 pairs, e4m3 1.0 bytes
  for (int i = threadIdx.x; i < (8192 + 32768) / 4; i += blockDim.x) reinterpret_cast<unsigned*>(smem)[i] = one;
  moeq_dev::fence_proxy_async_shared();
  __syncthreads();
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned long long a_desc = moeq_dev::wgmma_descriptor_swizzle128(base),
                           b_desc = moeq_dev::wgmma_descriptor_swizzle128(base + 8192);
  const unsigned a[4] = {one, one, one, one};
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  // The fresh forms load each group's A registers from shared memory (two register sets, alternating), as the GEMMs
  // write theirs by the decode while the group before is in flight (iterations even).
  if constexpr (kKind == Kind::kE4m3RsFresh || kKind == Kind::kBf16RsFresh) {
    constexpr int kMmas = kKind == Kind::kE4m3RsFresh ? 4 : 8;
    const volatile unsigned* a_words = reinterpret_cast<const volatile unsigned*>(smem) + (threadIdx.x % 64);
    unsigned fresh[2][kMmas][4];
    for (int it = 0; it < iterations; it += 2) {
#pragma unroll
      for (int set = 0; set < 2; ++set) {
#pragma unroll
        for (int j = 0; j < kMmas; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            fresh[set][j][r] = a_words[64 * (16 * set + (4 * j + r) % 16)];
            moeq_dev::wgmma_fence_operand(fresh[set][j][r]);
          }
        moeq_dev::wgmma_fence();
#pragma unroll
        for (int j = 0; j < kMmas; ++j) {
          if constexpr (kKind == Kind::kE4m3RsFresh)
            moeq_dev::wgmma_m64k32_e4m3_rs<128>(d, fresh[set][j], moeq_dev::wgmma_descriptor_advance(b_desc, 32 * j));
          else
            moeq_dev::wgmma_m64k16_rs<128, true>(d, fresh[set][j], moeq_dev::wgmma_descriptor_advance(b_desc, 32 * (j % 4) + 16384 * (j / 4)));
        }
        moeq_dev::wgmma_commit();
        moeq_dev::wgmma_wait<1>();
      }
    }
    moeq_dev::wgmma_wait<0>();
    if (threadIdx.x % 128 == 0) out[2 * blockIdx.x + threadIdx.x / 128] = d[0];
    return;
  } else {
  for (int it = 0; it < iterations; ++it) {
    moeq_dev::wgmma_fence();
    if constexpr (kKind == Kind::kE4m3Rs) {
#pragma unroll
      for (int j = 0; j < 4; ++j) moeq_dev::wgmma_m64k32_e4m3_rs<128>(d, a, moeq_dev::wgmma_descriptor_advance(b_desc, 32 * j));
    } else if constexpr (kKind == Kind::kE4m3Ss) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wgmma_m64n128k32_e4m3_ss(d, moeq_dev::wgmma_descriptor_advance(a_desc, 32 * j),
                                 moeq_dev::wgmma_descriptor_advance(b_desc, 32 * j));
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        moeq_dev::wgmma_m64k16_rs<128, true>(d, a, moeq_dev::wgmma_descriptor_advance(b_desc, 32 * (j % 4) + 16384 * (j / 4)));
    }
    moeq_dev::wgmma_commit();
    moeq_dev::wgmma_wait<1>();
  }
  moeq_dev::wgmma_wait<0>();
  if (threadIdx.x % 128 == 0) out[2 * blockIdx.x + threadIdx.x / 128] = d[0];
  }
}
}  // namespace

extern "C" __global__ void moeq_test_wgmma_rate_e4m3_rs(float* out, int iterations) { wgmma_rate<Kind::kE4m3Rs>(out, iterations); }
extern "C" __global__ void moeq_test_wgmma_rate_e4m3_ss(float* out, int iterations) { wgmma_rate<Kind::kE4m3Ss>(out, iterations); }
extern "C" __global__ void moeq_test_wgmma_rate_bf16_rs(float* out, int iterations) { wgmma_rate<Kind::kBf16Rs>(out, iterations); }
extern "C" __global__ void moeq_test_wgmma_rate_e4m3_rs_fresh(float* out, int iterations) { wgmma_rate<Kind::kE4m3RsFresh>(out, iterations); }
extern "C" __global__ void moeq_test_wgmma_rate_bf16_rs_fresh(float* out, int iterations) { wgmma_rate<Kind::kBf16RsFresh>(out, iterations); }
)";

}  // namespace moeq::test
