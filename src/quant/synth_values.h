// The value rules shared by synthetic checkpoints (synth_checkpoint.h) and
// dummy weights (dummy_source.h), so both give a model whose activations stay
// O(1) through its layers: Linear weights with std 1/sqrt(fan_in) and a factor
// 2^{-1,0,1} per 32-block (so quantization scales differ between blocks),
// norm weights 1 + 0.05 N(0,1), embeddings N(0,1), MoE correction biases
// 0.02 N(0,1).
#pragma once
#include <cmath>
#include <cstdint>

namespace mx::synth {

inline constexpr double kNormMean = 1.0, kNormStd = 0.05;
inline constexpr double kEmbedStd = 1.0;
inline constexpr double kCorrectionBiasStd = 0.02;
inline constexpr int64_t kFactorBlock = 32;

// Std of a Linear's weights before the block factors; 0.756 undoes the block
// factors' variance (E[f^2] = (1/4 + 1 + 4) / 3).
inline double weight_stddev(int64_t in_features) { return 1.0 / std::sqrt(double(in_features)) * 0.756; }
// The factor of one 32-block from a uniform draw u in [0, 1).
inline double block_factor(double u) { return std::ldexp(1.0, int(u * 3.0) - 1); }

}  // namespace mx::synth
