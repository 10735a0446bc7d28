#pragma once
// Bits the device ORs into the caller's error word (routing and the segment builder); the host
// reads it after a sync. The same values as cuda::kRoutingError* and moeq::kInputError*.
// NOTE: NVRTC-safe: no standard headers.

namespace moeq_dev {

constexpr int kErrorBadTopkId = 1;        // a topk id outside [-1, E_g)
constexpr int kErrorBadExpertMap = 2;     // expert_map[id] outside [-1, E)
constexpr int kErrorBatchedOverflow = 4;  // an expert received more than T rows, or a masked count is outside [0, T]

}  // namespace moeq_dev
