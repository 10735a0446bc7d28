#pragma once
// Files embedded into the library at build time (cmake/embed.cmake).
#include <string_view>
#include <vector>

namespace moeq {

struct EmbeddedFile {
  std::string_view path;  // relative to the embedded folder
  std::string_view data;
};

const std::vector<EmbeddedFile>& embedded_presets();
// tuning/<arch>/*.json, paths like "sm_90/qwen3-30b-a3b_mxfp4.json".
const std::vector<EmbeddedFile>& embedded_tuning_tables();
// device/**/*.cuh, paths like "moeq_dev/ptx/cvt.cuh".
const std::vector<EmbeddedFile>& embedded_device_headers();

}  // namespace moeq
