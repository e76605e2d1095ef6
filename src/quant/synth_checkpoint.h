// Small random checkpoints with the exact tensor layouts of the real ones
// (`mxserve synth`): Kimi-K2.5 Quark MXFP4 (both exclude revisions), Kimi-K2.5
// compressed-tensors INT4, DeepSeek-V3 FP8 128x128 blocks, and a Llama. Sizes
// are reduced but the MLA dims (q_lora 1536, kv_lora 512, nope 128, rope 64,
// v 128) are kept; weights are deterministic given the seed (each tensor draws
// from its own stream keyed by seed and name) and scaled by 1/sqrt(fan_in) so
// activations stay O(1) through the layers. Quantized weights come from real
// quantization of random BF16 floats, so scales vary.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mx {

struct SynthPreset {
  std::string name;
  std::string description;
};
const std::vector<SynthPreset>& synth_presets();

struct SynthResult {
  int64_t tensors = 0;
  int64_t bytes = 0;  // data bytes written (all tensors)
};

// Writes config.json and model.safetensors into `out_dir` (created if
// needed). Throws mx::InvalidArgument for an unknown preset.
SynthResult write_synthetic_checkpoint(const std::filesystem::path& out_dir, const std::string& preset,
                                       uint64_t seed);

}  // namespace mx
