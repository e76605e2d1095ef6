// Helpers for model tests: synthetic checkpoints written by `mxserve synth`
// (MX_BINARY) once per process, and one-sequence forward steps.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/causal_lm.h"

namespace mx::test {

// Directory of a synth checkpoint (written on first use into a temp dir).
std::filesystem::path synth_checkpoint(const std::string& preset, uint64_t seed);

// A copy of a checkpoint directory whose config.json has `override` merged
// in (JSON merge patch), for variants the synth presets do not cover.
std::filesystem::path with_config_override(const std::filesystem::path& dir, const std::string& name,
                                           const nlohmann::json& override);

// The golden-file checksum of a checkpoint directory (tools/golden_checkpoint.py).
std::string checkpoint_checksum(const std::filesystem::path& dir);

std::unique_ptr<CausalLM> load(const std::filesystem::path& dir, ActivationMode mode = ActivationMode::W4A16);

// Max |a - b| over two equally long vectors.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace mx::test
