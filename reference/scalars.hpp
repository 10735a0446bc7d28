#pragma once
// Loads and stores of one float element of a 16/32-bit float buffer, by dtype.
#include <cstdint>
#include <cstring>

#include "moeq/error.hpp"
#include "moeq/types.hpp"
#include "reference/formats.hpp"

namespace moeq::ref {

inline float load_float(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f32: return static_cast<const float*>(base)[i];
    default: throw Error("load_float: dtype " + std::string(to_string(t)) + " is not a float type");
  }
}

inline void store_float(DType t, void* base, int64_t i, float v) {
  switch (t) {
    case DType::bf16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); return;
    case DType::f16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); return;
    case DType::f32: static_cast<float*>(base)[i] = v; return;
    default: throw Error("store_float: dtype " + std::string(to_string(t)) + " is not a float type");
  }
}

// Value after one rounding to dtype (identity for f32).
inline float round_to(DType t, float v) {
  switch (t) {
    case DType::bf16: return bf16_to_f32(f32_to_bf16(v));
    case DType::f16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

}  // namespace moeq::ref
