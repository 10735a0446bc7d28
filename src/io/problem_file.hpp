#pragma once
// Problems and results as safetensors files (docs/file-format.md): tensor names, canonical
// layouts and the layer metadata in "__metadata__".
#include <string>

#include "io/problem.hpp"
#include "io/safetensors.hpp"

namespace moeq::io {

// Layer metadata <-> ExpertsDesc (+ layout). Throws naming the key and value.
std::map<std::string, std::string> desc_metadata(const ExpertsDesc& desc, Layout layout);
ExpertsDesc desc_from_metadata(const std::map<std::string, std::string>& meta, const std::string& origin,
                               Layout* layout);

// Adds the weight tensors (w13.*, w2.*) / the input tensors (hidden, topk_ids, ...) to a file.
void add_weight_tensors(const HostProblem& p, SafetensorsFile& file);
void add_input_tensors(const HostProblem& p, SafetensorsFile& file);

// One file with the layer metadata, the weights and the inputs.
void save_problem(const std::string& path, const HostProblem& p);
// Layer metadata and weights from `weights_path`, inputs from `inputs_path` (may be the same
// file). Every tensor's dtype and shape is checked against the metadata.
HostProblem load_problem(const std::string& weights_path, const std::string& inputs_path);
HostProblem problem_from_files(const SafetensorsFile& weights, const SafetensorsFile& inputs);

}  // namespace moeq::io
