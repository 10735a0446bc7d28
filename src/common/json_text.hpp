#pragma once
// A JSON value quoted in an error message: its JSON text cut to 60 characters, or, for an array or
// object nested deeper than 4 levels or holding more than 64 values, its kind and size.
// NOTE: dumping recurses once per level of nesting, and a corrupt or hostile file can nest 100000
// deep (a stack overflow, found by fuzzing); the shape is measured here without recursion.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace moeq {

inline bool json_is_small(const nlohmann::json& value) {
  constexpr int kMaxDepth = 4;
  constexpr size_t kMaxValues = 64;
  std::vector<std::pair<const nlohmann::json*, int>> pending{{&value, 0}};
  size_t seen = 0;
  while (!pending.empty()) {
    const auto [v, depth] = pending.back();
    pending.pop_back();
    if (++seen > kMaxValues || depth > kMaxDepth) return false;
    if (!v->is_structured()) continue;
    if (v->size() > kMaxValues) return false;
    for (const auto& child : *v) pending.emplace_back(&child, depth + 1);
  }
  return true;
}

inline std::string json_text(const nlohmann::json& value) {
  if (value.is_structured() && !json_is_small(value))
    return std::string(value.is_array() ? "an array of " : "an object of ") + std::to_string(value.size()) +
           (value.is_array() ? " items" : " keys");
  constexpr size_t kMaxShown = 60;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() <= kMaxShown ? text : text.substr(0, kMaxShown) + "...";
}

}  // namespace moeq
