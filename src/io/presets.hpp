#pragma once
// Model presets (bench/shapes/*.json, embedded at build time) and the scheme strings of the
// CLI ("int4-g128:bf16", "mxfp4:fp8-token", "fp8-block").
#include <string>
#include <string_view>
#include <vector>

#include "moeq/experts.hpp"

namespace moeq::io {

struct Preset {
  std::string name;
  std::string description;
  ExpertsDesc desc;            // the layer with its default scheme applied
  std::string default_scheme;
};

const std::vector<Preset>& presets();
// A preset by name, or from a JSON file of the same format (bench/shapes/*.json) where `name` ends
// in ".json". Throws moeq::Error listing the known names when `name` is unknown.
const Preset& find_preset(std::string_view name);
// Parses one preset document (exposed for tests). `origin` names it in errors.
Preset parse_preset(std::string_view json_text, const std::string& origin);

// Scheme "W[:A]": W = mxfp4 | nvfp4 | mxfp8 | fp8-channel | fp8-block | int4[-gN][-zp] |
// int8[-gN] (N in 32, 64, 128; 0 or "ch" = per channel); A = bf16 | f16 (16-bit; also sets
// act_dtype) | fp8-token | mxfp8 | mxfp4. Missing A means 16-bit. Throws on anything else.
void apply_scheme(std::string_view scheme, ExpertsDesc& desc);

// Overrides the layer's activation by name ("silu", "swiglu-oai", ...). The w13 row order
// (interleaved or [gate; up]) is the checkpoint's and stays, except that non-gated activations
// have no gate/up pairs: they drop interleaving and NVFP4's second global scale. Throws on an
// unknown name.
void apply_activation(std::string_view name, ExpertsDesc& desc);
std::string scheme_string(const ExpertsDesc& desc);

}  // namespace moeq::io
