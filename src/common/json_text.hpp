#pragma once
// JSON helpers for the readers of user files (safetensors headers, presets, tuning tables): json_text,
// first_unknown_key, and first_duplicate_key below.
// A JSON value quoted in an error message: its JSON text cut to 60 characters, or, for an array or
// object nested deeper than 4 levels or holding more than 64 values, its kind and size.
// NOTE: dumping recurses once per level of nesting, and a corrupt or hostile file can nest 100000
// deep (a stack overflow, found by fuzzing); the shape is measured here without recursion.
#include <initializer_list>
#include <optional>
#include <set>
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

// A key from a file as an error message shows it: non-ASCII and control characters escaped (so a cut never splits
// a character) and cut to 60 characters, as json_text cuts values.
inline std::string shown_key(const std::string& key) {
  std::string text = nlohmann::json(key).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  text = text.substr(1, text.size() - 2);  // the quotes
  constexpr size_t kMaxShown = 60;
  return text.size() <= kMaxShown ? text : text.substr(0, kMaxShown) + "...";
}

// The first key of `object` that is none of `known` (shown_key), if any: a misspelt optional field would otherwise
// be ignored, and its default used without a word. NOTE: optional, as "" is a key a file may hold.
inline std::optional<std::string> first_unknown_key(const nlohmann::json& object, std::initializer_list<const char*> known) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool found = false;
    for (const char* k : known) found = found || it.key() == k;
    if (!found) return shown_key(it.key());
  }
  return std::nullopt;
}

inline std::string json_text(const nlohmann::json& value) {
  if (value.is_structured() && !json_is_small(value))
    return std::string(value.is_array() ? "an array of " : "an object of ") + std::to_string(value.size()) +
           (value.is_array() ? " items" : " keys");
  constexpr size_t kMaxShown = 60;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() <= kMaxShown ? text : text.substr(0, kMaxShown) + "...";
}

// The first key that appears twice in one object of the JSON text [first, last) (nlohmann keeps only one
// value for a repeated key, silently), as shown_key shows it, if any; *top_level says whether that object is the
// document itself. Text that is not JSON gives none (the caller's parse reports it).
// PERF: one SAX pass, O(n log n); nlohmann's callback parser rescanned each parent object at every object's
// end, quadratic (a 40000-entry safetensors header took over a minute, found by fuzzing).
template <typename Iterator>
std::optional<std::string> first_duplicate_key(Iterator first, Iterator last, bool* top_level = nullptr) {
  using json = nlohmann::json;
  struct Finder : nlohmann::json_sax<json> {
    std::vector<std::set<std::string>> open_objects;  // the keys of each open object
    std::optional<std::string> duplicate;
    bool duplicate_top_level = false;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override {
      open_objects.emplace_back();
      return true;
    }
    bool key(string_t& key) override {
      if (open_objects.back().insert(key).second) return true;
      duplicate = shown_key(key);
      duplicate_top_level = open_objects.size() == 1;
      return false;  // stop at the first
    }
    bool end_object() override {
      open_objects.pop_back();
      return true;
    }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  } finder;
  json::sax_parse(first, last, &finder);
  if (top_level != nullptr) *top_level = finder.duplicate_top_level;
  return finder.duplicate;
}

}  // namespace moeq
