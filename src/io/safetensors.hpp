#pragma once
// Reading and writing the safetensors file format: an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, then the raw data.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moeq/types.hpp"

namespace moeq::io {

struct Tensor {
  std::string name;
  DType dtype = DType::none;  // bf16 f16 f32 e4m3 e5m2 u8 i32 i64
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // exactly numel * element size bytes
  int64_t numel() const;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<Tensor> tensors;                  // in file data order
  const Tensor* find(std::string_view name) const;  // nullptr if absent
  const Tensor& get(std::string_view name) const;   // throws Error naming the tensor and origin
  void add(Tensor t);                                // throws if the name exists
  std::string origin = "<memory>";                   // path or "<memory>", used in messages
};

SafetensorsFile parse_safetensors(const uint8_t* bytes, size_t size, std::string origin);
SafetensorsFile read_safetensors(const std::string& path);
std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file);
// Writes through a temporary file in the same folder and an atomic rename, so a failed write
// never leaves a partial file at `path`.
void write_safetensors(const std::string& path, const SafetensorsFile& file);

// Name of a DType in safetensors ("BF16"...), and the reverse (nullopt for unknown names).
// DTypes the format cannot name (none, e2m1, ue8m0, u4) give an empty name.
std::string_view safetensors_dtype_name(DType t);
std::optional<DType> parse_safetensors_dtype(std::string_view name);

}  // namespace moeq::io
