// RoPE inverse frequencies. Follows transformers' rope initializers (default,
// linear, llama3, yarn) so the CPU backend and the golden reference agree;
// kimi-k2.5.md §3 gives the DeepSeek-YaRN equations these reduce to.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "ops/ops.h"

namespace mx {

double yarn_mscale(double factor, double mscale) {
  if (factor <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(factor) + 1.0;
}

namespace {

std::vector<double> plain_inv_freq(double theta, int64_t dim) {
  std::vector<double> f(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) f[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(dim));
  return f;
}

// Dimension index at which a wavelength completes num_rotations over the
// original context (YaRN's correction range).
double yarn_correction_dim(double num_rotations, int64_t dim, double theta, double original_max_pos) {
  return double(dim) * std::log(original_max_pos / (num_rotations * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

void apply_yarn(std::vector<double>& inv_freq, const RopeScaling& s, double theta, int64_t dim,
                int64_t max_pos, float& attention_factor) {
  double original = s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : double(max_pos);
  double low = std::max(std::floor(yarn_correction_dim(s.beta_fast, dim, theta, original)), 0.0);
  double high = std::min(std::ceil(yarn_correction_dim(s.beta_slow, dim, theta, original)), double(dim - 1));
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    inv_freq[i] = inv_freq[i] * (1 - ramp) + inv_freq[i] / s.factor * ramp;
  }
  // transformers: mscale/mscale_all_dim ratio when both are given, else m(factor).
  if (s.mscale != 0 && s.mscale_all_dim != 0)
    attention_factor = float(yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim));
  else
    attention_factor = float(yarn_mscale(s.factor, 1.0));
}

void apply_llama3(std::vector<double>& inv_freq, const RopeScaling& s) {
  double old_len = s.original_max_position_embeddings;
  MX_CHECK(old_len > 0, "llama3 rope scaling needs original_max_position_embeddings");
  double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv_freq) {
    double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_wavelen) continue;  // high frequency: unchanged
    if (wavelen > low_wavelen) {
      f /= s.factor;
      continue;
    }
    double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1 - smooth) * f / s.factor + smooth * f;
  }
}

}  // namespace

RopeTable make_rope_table(const RopeScaling& scaling, double theta, int64_t rotary_dim,
                          int64_t max_position_embeddings, RopeTable::Style style) {
  if (rotary_dim <= 0 || rotary_dim % 2 != 0) fail_input("rotary dimension {} must be positive and even", rotary_dim);
  RopeTable t;
  t.style = style;
  t.rotary_dim = rotary_dim;
  std::vector<double> inv_freq = plain_inv_freq(theta, rotary_dim);
  const std::string& type = scaling.type;
  if (type == "yarn") {
    apply_yarn(inv_freq, scaling, theta, rotary_dim, max_position_embeddings, t.attention_factor);
  } else if (type == "llama3") {
    apply_llama3(inv_freq, scaling);
  } else if (type == "linear") {
    for (double& f : inv_freq) f /= scaling.factor;
  } else if (!type.empty() && type != "default") {
    fail_input("unsupported rope_scaling type '{}' (supported: yarn, llama3, linear)", type);
  }
  t.inv_freq.assign(inv_freq.begin(), inv_freq.end());
  return t;
}

}  // namespace mx
