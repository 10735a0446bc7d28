#pragma once
// Bit-exact codecs for every storage format moeq reads or writes (CONTRACT §4, §5).
// Encoders take fp32 and round to nearest, ties to even (RNE), exactly as the GPU's
// cvt.rn(.satfinite) instructions do; decoders are exact.
//
// NaN and overflow policy (the "satfinite" rule of the 8- and 4-bit encoders):
//   bf16 / f16:  IEEE: overflow -> +-inf, NaN -> 0x7FFF (sign dropped, as cvt.rn on sm_90).
//   e4m3 (fn):   no inf; |x| > 448 (after rounding) and +-inf -> +-448; NaN -> 0x7F (sign kept: 0xFF).
//   e5m2:        |x| > 57344 and +-inf -> +-57344; NaN -> 0x7F (sign kept: 0xFF).
//   e2m1:        no inf, no NaN; |x| > 6 and +-inf -> +-6; NaN -> +6 (0x7).
//   ue8m0:       decode 255 -> NaN; value 2^(code - 127).
#include <cstdint>

namespace moeq::ref {

float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float x);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float x);

float e4m3_to_f32(uint8_t code);
uint8_t f32_to_e4m3(float x);
float e5m2_to_f32(uint8_t code);
uint8_t f32_to_e5m2(float x);
float e2m1_to_f32(uint8_t code);  // low 4 bits used
uint8_t f32_to_e2m1(float x);     // returns 0..15

float ue8m0_to_f32(uint8_t code);
// The MX shared scale 2^ceil(log2(amax / max_elem)) as a ue8m0 code, clamped to [0, 254].
// amax == 0 (or subnormal small) gives code 0, the smallest scale; amax NaN gives 255.
uint8_t ue8m0_scale_for(float amax, float max_elem);

// Packed nibbles: element 2j is the low nibble of byte j.
inline uint8_t nibble_at(const uint8_t* packed, int64_t i) {
  return static_cast<uint8_t>((packed[i >> 1] >> ((i & 1) * 4)) & 0xF);
}
inline void set_nibble(uint8_t* packed, int64_t i, uint8_t v) {
  uint8_t& b = packed[i >> 1];
  const int shift = static_cast<int>(i & 1) * 4;
  b = static_cast<uint8_t>((b & ~(0xF << shift)) | ((v & 0xF) << shift));
}

// Integer codes stored unsigned with an offset: uint4 = q + 8 (q in [-8, 7]), uint8 = q + 128
// (q in [-128, 127]). Encoders saturate q to the range.
inline int uint4_value(uint8_t code) { return static_cast<int>(code & 0xF) - 8; }
inline int uint8_value(uint8_t code) { return static_cast<int>(code) - 128; }
inline uint8_t uint4_code(int q) { return static_cast<uint8_t>((q < -8 ? -8 : q > 7 ? 7 : q) + 8); }
inline uint8_t uint8_code(int q) { return static_cast<uint8_t>((q < -128 ? -128 : q > 127 ? 127 : q) + 128); }

// Largest finite magnitudes, used by quantizers.
inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kE5m2Max = 57344.0f;
inline constexpr float kE2m1Max = 6.0f;

}  // namespace moeq::ref
