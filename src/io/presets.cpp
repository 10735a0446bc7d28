#include "io/presets.hpp"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/embedded.hpp"
#include "common/json_text.hpp"
#include "moeq/error.hpp"

namespace moeq::io {
namespace {

using nlohmann::json;

template <typename T>
T field(const json& j, const char* key, const std::string& origin) {
  if (!j.contains(key)) throw Error(origin + ": field '" + key + "' is missing");
  // NOTE: get<int64_t> would truncate 2.9 to 2 and wrap 2^64 - 1 to -1 (or worse, 1e300).
  if constexpr (std::is_same_v<T, int64_t>) {
    const json& v = j.at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
      throw Error(origin + ": field '" + key + "' = " + json_text(v) + " is not a 64-bit signed integer");
  }
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(origin + ": field '" + key + "' = " + json_text(j.at(key)) + " has the wrong type");
  }
}

template <typename T>
T field_or(const json& j, const char* key, T fallback, const std::string& origin) {
  return j.contains(key) ? field<T>(j, key, origin) : fallback;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

[[noreturn]] void bad_scheme(std::string_view scheme, const std::string& why) {
  throw Error("scheme '" + std::string(scheme) + "': " + why +
              " (expected W[:A], e.g. int4-g128:bf16, mxfp4:fp8-token, fp8-block)");
}

void apply_weight_part(std::string_view scheme, std::string_view part, ExpertsDesc& d) {
  if (auto w = parse_weight_format(part)) {
    d.weight_format = *w;
    d.has_zero_point = false;
    return;
  }
  // int4 / int8 with options
  const auto pieces = split(part, '-');
  const auto w = parse_weight_format(pieces[0]);
  if (!w || (*w != WeightFormat::int4 && *w != WeightFormat::int8))
    bad_scheme(scheme, "unknown weight format '" + std::string(part) + "'");
  d.weight_format = *w;
  d.has_zero_point = false;
  for (size_t i = 1; i < pieces.size(); ++i) {
    const std::string_view p = pieces[i];
    if (p == "zp") {
      d.has_zero_point = true;
    } else if (p == "ch") {
      d.group_size = 0;
    } else if (p.size() > 1 && p[0] == 'g') {
      // Digits only: std::stoi would accept "g64x", "g+64" or "g 64" as 64.
      const std::string_view digits = p.substr(1);
      int group = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), group);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits[0] < '0' || digits[0] > '9')
        bad_scheme(scheme, "group '" + std::string(p) + "' is not a number");
      d.group_size = group;
    } else {
      bad_scheme(scheme, "unknown weight option '" + std::string(p) + "'");
    }
  }
}

}  // namespace

Preset parse_preset(std::string_view text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(origin + ": not valid JSON: " + e.what());
  }
  if (const auto key = first_duplicate_key(text.begin(), text.end()))
    throw Error(origin + ": field '" + *key + "' appears twice in one object");
  if (!j.is_object()) throw Error(origin + ": the document is not a JSON object");
  if (const auto key = first_unknown_key(j, {"name", "description", "num_experts", "num_global_experts", "top_k",
                                             "hidden_size", "intermediate_size", "activation", "swiglu_alpha",
                                             "swiglu_limit", "silu_clamp", "interleaved_gate_up", "default_scheme", "bias"}))
    throw Error(origin + ": field '" + *key + "' is unknown (README.md, \"The CLI\", lists the fields)");
  Preset p;
  p.name = field<std::string>(j, "name", origin);
  p.description = field_or<std::string>(j, "description", "", origin);
  ExpertsDesc& d = p.desc;
  d.num_experts = field<int64_t>(j, "num_experts", origin);
  d.num_global_experts = field_or<int64_t>(j, "num_global_experts", 0, origin);
  d.top_k = field<int64_t>(j, "top_k", origin);
  d.hidden_size = field<int64_t>(j, "hidden_size", origin);
  d.intermediate_size = field<int64_t>(j, "intermediate_size", origin);
  const auto act = field<std::string>(j, "activation", origin);
  const auto kind = parse_activation(act);
  if (!kind) throw Error(origin + ": activation = '" + act + "' is unknown");
  d.activation.kind = *kind;
  d.activation.swiglu_alpha = field_or<float>(j, "swiglu_alpha", d.activation.swiglu_alpha, origin);
  d.activation.swiglu_limit = field_or<float>(j, "swiglu_limit", d.activation.swiglu_limit, origin);
  d.activation.silu_clamp = field_or<float>(j, "silu_clamp", 0.0f, origin);
  d.interleaved_gate_up = field_or<bool>(j, "interleaved_gate_up", false, origin);
  p.default_scheme = field_or<std::string>(j, "default_scheme", "int4-g128:bf16", origin);
  try {
    apply_scheme(p.default_scheme, d);
  } catch (const Error& e) {
    throw Error(origin + ": field 'default_scheme': " + e.what());
  }
  if (field_or<bool>(j, "bias", false, origin)) d.bias_dtype = DType::f32;
  return p;
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = [] {
    std::vector<Preset> v;
    for (const auto& f : embedded_presets()) v.push_back(parse_preset(f.data, std::string(f.path)));
    return v;
  }();
  return all;
}

namespace {

// A preset file named on the command line, read once per process; references stay valid.
const Preset& preset_from_file(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, Preset> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("preset file '" + path + "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return loaded.emplace(path, parse_preset(text.str(), "preset file '" + path + "'")).first->second;
}

}  // namespace

const Preset& find_preset(std::string_view name) {
  // NOTE: a name ending in .json is a file of the bench/shapes format: a model's layer that has no preset.
  if (name.size() > 5 && name.substr(name.size() - 5) == ".json") return preset_from_file(std::string(name));
  std::string known;
  for (const auto& p : presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error("preset '" + std::string(name) + "' is unknown; known presets: " + known +
              " (or a JSON file of their format, name.json)");
}

void apply_scheme(std::string_view scheme, ExpertsDesc& d) {
  const auto parts = split(scheme, ':');
  if (parts.size() > 2 || parts[0].empty()) bad_scheme(scheme, "malformed");
  apply_weight_part(scheme, parts[0], d);
  d.act_format = ActFormat::none;
  if (parts.size() == 2) {
    const std::string_view a = parts[1];
    // Case-insensitive like every other name ("F16" must set f16, not fall through to
    // parse_act_format's 16-bit spelling and keep bf16).
    if (const auto t = parse_dtype(a); t == DType::bf16 || t == DType::f16) {
      d.act_dtype = *t;
    } else if (auto f = parse_act_format(a)) {
      d.act_format = *f;
    } else {
      bad_scheme(scheme, "unknown activation format '" + std::string(a) + "'");
    }
  }
}

void apply_activation(std::string_view name, ExpertsDesc& d) {
  const auto kind = parse_activation(name);
  if (!kind) throw Error("activation = '" + std::string(name) + "' is unknown; see `moeq info`");
  d.activation.kind = *kind;
  if (!is_gated(*kind)) {
    d.interleaved_gate_up = false;
    d.num_global_scales_w13 = 1;
  }
}

std::string scheme_string(const ExpertsDesc& d) {
  std::string s(to_string(d.weight_format));
  if (d.weight_format == WeightFormat::int4 || d.weight_format == WeightFormat::int8) {
    s += d.group_size == 0 ? "-ch" : "-g" + std::to_string(d.group_size);
    if (d.has_zero_point) s += "-zp";
  }
  s += ":";
  s += d.act_format == ActFormat::none ? std::string(to_string(d.act_dtype)) : std::string(to_string(d.act_format));
  return s;
}

}  // namespace moeq::io
