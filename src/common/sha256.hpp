#pragma once
// SHA-256 (FIPS 180-4), for content-addressed cache keys. Not constant-time; not for secrets.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moeq {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void* data, size_t num_bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Ends the message; the object must not be updated afterwards.
  Digest finish();

 private:
  void compress(const uint8_t* block);  // one 64-byte block

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> block_{};
  size_t block_fill_ = 0;
  uint64_t total_bytes_ = 0;
};

Sha256::Digest sha256(const void* data, size_t num_bytes);
std::string to_hex(const Sha256::Digest& digest);  // 64 lowercase hex digits
std::string sha256_hex(std::string_view text);

}  // namespace moeq
