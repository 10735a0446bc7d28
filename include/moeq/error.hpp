#pragma once
#include <stdexcept>
#include <string>

namespace moeq {

// Every rejected call throws this. The message names the argument and the value
// (e.g. "topk_ids[3,1] = 301 is outside [0, 256)").
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace moeq
