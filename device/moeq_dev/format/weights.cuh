#pragma once
// Weight formats and scale storage as the GEMM kernels see them (CONTRACT §4). The per-lane
// dequantization into MMA fragments is format/weights_fragment.cuh.
// NOTE: NVRTC-safe: no standard headers.
#include "moeq_dev/format/fp4.cuh"
#include "moeq_dev/format/fp8.cuh"
#include "moeq_dev/format/ue8m0.cuh"
#include "moeq_dev/format/weights_fast.cuh"
#include "moeq_dev/ptx/cvt.cuh"

namespace moeq_dev {

// The same order as moeq::WeightFormat.
enum class WeightFormatId : int { kMxfp4 = 0, kNvfp4, kMxfp8, kFp8Channel, kFp8Block, kInt4, kInt8 };
// Scale storage of INT formats (the others are fixed by the format).
enum class ScaleDtypeId : int { kBf16 = 0, kF16, kF32 };

template <WeightFormatId F>
struct WeightFormatTraits {
  static constexpr bool kFourBit = F == WeightFormatId::kMxfp4 || F == WeightFormatId::kNvfp4 || F == WeightFormatId::kInt4;
  static constexpr int kCodeBits = kFourBit ? 4 : 8;
};

// How a GEMM's weights are scaled. The INT scale dtype and whether there are zero points are
// also compile-time members of the kernel config (Cfg::kScaleDtype, Cfg::kZeroPoints), which
// the kernels use; the run-time copies here must agree (the host writes both).
struct WeightScaling {
  const void* scales;
  const float* global_scales;        // NVFP4
  const unsigned char* zero_points;  // INT4 with zero points, else null
  int group_size;                    // INT4 / INT8: K per scale, 0 = per channel
  ScaleDtypeId scale_dtype;          // INT4 / INT8
  int num_global_scales;             // NVFP4: 1 or 2 ([gate; up] halves)
};

// The compile-time scale storage of a config: INT formats take theirs from the config, the
// others have one fixed by the format.
template <class Cfg>
struct ScaleStorage {
  static constexpr bool kInt = Cfg::kFormat == WeightFormatId::kInt4 || Cfg::kFormat == WeightFormatId::kInt8;
  static constexpr ScaleDtypeId kDtype = kInt ? static_cast<ScaleDtypeId>(Cfg::kScaleDtype) : ScaleDtypeId::kF32;
  static constexpr bool kZeroPoints = kInt && Cfg::kZeroPoints;
};

}  // namespace moeq_dev
