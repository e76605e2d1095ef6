// GPU parity of the CUDA batch sampler (src/cuda/sampling) against the CPU
// sampler (engine/sampler.h) on fresh random logits (a new seed per run,
// printed). Checks:
//   - processed logits (banned tokens, logit_bias, repetition/presence/
//     frequency penalties) equal the CPU's process_logits bit for bit;
//   - greedy picks exactly the CPU's token, including ties (lowest id);
//   - top-k / min-p / top-p draws fall only in the set the CPU rules allow, and
//     the draw frequencies follow the renormalized distribution;
//   - a seeded row draws the same token whatever else is in its batch;
//   - logprobs (chosen token and top-N) within 1e-4 of the CPU's, same ids.
// Prints one line per check; exit status 0 only if all pass. Needs a GPU.
//   sampler_parity [--seed N] [--vocab V]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda/sampling/cuda_batch_sampler.h"
#include "engine/batch_sampler.h"
#include "engine/sampler.h"

namespace mx {
namespace {

std::mt19937_64 rng;
int failures = 0;

void report(bool ok, const std::string& name, const std::string& detail) {
  std::printf("%-44s %s  %s\n", name.c_str(), ok ? "PASS" : "FAIL", detail.c_str());
  if (!ok) ++failures;
}

Tensor random_logits(int64_t rows, int64_t vocab, float scale) {
  Tensor t = Tensor::empty(DType::F32, {rows, vocab});
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

std::span<const float> row_of(const Tensor& t, int64_t r) {
  return {t.data<float>() + r * t.dim(1), size_t(t.dim(1))};
}

Sequence make_seq(int64_t id, int32_t vocab, int64_t prompt, int64_t output) {
  Sequence s;
  s.id = id;
  std::uniform_int_distribution<int32_t> tok(0, std::min(vocab - 1, 400));  // repeats are likely
  for (int64_t i = 0; i < prompt + output; ++i) s.tokens.push_back(tok(rng));
  s.num_prompt_tokens = prompt;
  s.seed = rng();
  s.rng.seed(s.seed);
  return s;
}

// Rows exercising every processor; greedy so the chosen token is comparable too.
std::vector<Sequence> processor_rows(int32_t vocab) {
  std::vector<Sequence> seqs;
  for (int i = 0; i < 24; ++i) {
    Sequence s = make_seq(i, vocab, 30 + i, i % 7);
    SamplingParams& p = s.params;
    p.temperature = 0;
    if (i % 2) p.repetition_penalty = 1.0f + 0.1f * float(i % 5);
    if (i % 3 == 1) p.presence_penalty = 0.3f * float(i % 4) - 0.5f;
    if (i % 4 == 2) p.frequency_penalty = 0.17f * float(i % 6) - 0.4f;
    if (i % 5 == 0) p.logit_bias = {{int32_t(i), 3.5f}, {int32_t(i + 7), -100.0f}, {vocab - 1, 0.25f}};
    seqs.push_back(std::move(s));
  }
  return seqs;
}

std::vector<int32_t> bans_for(size_t i) { return i % 6 == 3 ? std::vector<int32_t>{int32_t(i), 5, 11} : std::vector<int32_t>{}; }

void check_processing_and_greedy(cuda::CudaBatchSampler& gpu, int32_t vocab) {
  auto seqs = processor_rows(vocab);
  const Tensor logits = random_logits(int64_t(seqs.size()), vocab, 3.0f);
  std::vector<SamplingRow> rows;
  for (size_t i = 0; i < seqs.size(); ++i) rows.push_back({&seqs[i], bans_for(i)});
  const auto got = gpu.sample(logits, rows, vocab);
  const Tensor processed = gpu.last_processed_logits();
  int64_t mismatched_values = 0, mismatched_tokens = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<float> want(row_of(logits, int64_t(i)).begin(), row_of(logits, int64_t(i)).end());
    for (int32_t t : bans_for(i)) want[size_t(t)] = -std::numeric_limits<float>::infinity();
    process_logits(want, seqs[i].params, seqs[i].tokens, seqs[i].num_prompt_tokens);
    const auto have = row_of(processed, int64_t(i));
    for (int32_t t = 0; t < vocab; ++t)
      if (std::memcmp(&want[size_t(t)], &have[size_t(t)], sizeof(float)) != 0) ++mismatched_values;
  }
  auto cpu = make_cpu_batch_sampler();
  const auto want = cpu->sample(logits, rows, vocab);
  for (size_t i = 0; i < seqs.size(); ++i) mismatched_tokens += got[i].token != want[i].token;
  report(mismatched_values == 0, "processed logits == CPU process_logits",
         std::to_string(mismatched_values) + " of " + std::to_string(int64_t(seqs.size()) * vocab) + " values differ (bitwise)");
  report(mismatched_tokens == 0, "greedy token == CPU (with processors)",
         std::to_string(mismatched_tokens) + " of " + std::to_string(seqs.size()) + " rows differ");
}

void check_greedy_ties(cuda::CudaBatchSampler& gpu, int32_t vocab) {
  // Few distinct values: the maximum is shared by many ids; the lowest must win.
  const int64_t n = 64;
  Tensor logits = Tensor::empty(DType::F32, {n, vocab});
  std::uniform_int_distribution<int> level(0, 3);
  for (int64_t i = 0; i < logits.numel(); ++i) logits.data<float>()[i] = float(level(rng));
  std::vector<Sequence> seqs;
  for (int64_t i = 0; i < n; ++i) seqs.push_back(make_seq(i, vocab, 4, 0));
  std::vector<SamplingRow> rows;
  for (auto& s : seqs) {
    s.params.temperature = 0;
    rows.push_back({&s, {}});
  }
  const auto got = gpu.sample(logits, rows, vocab);
  const auto want = make_cpu_batch_sampler()->sample(logits, rows, vocab);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += got[size_t(i)].token != want[size_t(i)].token;
  report(bad == 0, "greedy ties -> lowest id, as the CPU", std::to_string(bad) + " of " + std::to_string(n) + " rows differ");
}

// The tokens the CPU rules allow: sorted by (logit desc, id asc), top-k, then
// min-p, then the top-p nucleus (engine/sampler.cc), with their probabilities.
std::vector<std::pair<int32_t, double>> allowed(std::span<const float> logits, const SamplingParams& p) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  if (p.top_k > 0 && size_t(p.top_k) < ids.size()) ids.resize(size_t(p.top_k));
  std::vector<double> probs;
  for (int32_t id : ids) probs.push_back(std::exp(double(logits[size_t(id)] - logits[size_t(ids[0])]) / p.temperature));
  size_t keep = ids.size();
  while (p.min_p > 0 && keep > 1 && probs[keep - 1] < double(p.min_p) * probs[0]) --keep;
  if (p.top_p < 1.0f) {
    const double total = std::accumulate(probs.begin(), probs.begin() + long(keep), 0.0);
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += probs[i];
      if (cum >= double(p.top_p) * total) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < keep; ++i) out.emplace_back(ids[i], probs[i]);
  return out;
}

void check_filters(cuda::CudaBatchSampler& gpu, const std::string& name, int32_t vocab,
                   const std::function<void(SamplingParams&)>& set) {
  // One logits row repeated with different seeds: many independent draws at once.
  const int64_t draws = 4096;
  const Tensor one = random_logits(1, vocab, 2.0f);
  Tensor logits = Tensor::empty(DType::F32, {draws, vocab});
  for (int64_t r = 0; r < draws; ++r) std::memcpy(logits.data<float>() + r * vocab, one.data<float>(), size_t(vocab) * 4);
  std::vector<Sequence> seqs;
  std::vector<SamplingRow> rows;
  seqs.reserve(size_t(draws));
  for (int64_t r = 0; r < draws; ++r) {
    seqs.push_back(make_seq(r, vocab, 3, 0));
    set(seqs.back().params);
  }
  for (auto& s : seqs) rows.push_back({&s, {}});
  const auto got = gpu.sample(logits, rows, vocab);
  const auto allow = allowed(row_of(one, 0), seqs[0].params);
  std::vector<double> expected(size_t(vocab), 0.0);
  double total = 0;
  for (auto [id, p] : allow) total += p;
  for (auto [id, p] : allow) expected[size_t(id)] = p / total;
  std::vector<int64_t> seen(size_t(vocab), 0);
  int64_t outside = 0;
  for (const auto& t : got) {
    ++seen[size_t(t.token)];
    outside += expected[size_t(t.token)] == 0.0;
  }
  // Total variation distance between the draw frequencies and the allowed
  // distribution; sampling noise alone is about sqrt(|allowed| / draws) / 2.
  double tv = 0;
  for (int32_t t = 0; t < vocab; ++t) tv += std::abs(double(seen[size_t(t)]) / double(draws) - expected[size_t(t)]);
  tv /= 2;
  const double noise = std::sqrt(double(allow.size()) / double(draws)) / 2;
  char detail[160];
  std::snprintf(detail, sizeof detail, "%ld of %ld draws outside the %zu allowed; TV distance %.4f (noise ~%.4f)",
                long(outside), long(draws), allow.size(), tv, noise);
  report(outside == 0 && tv < 3 * noise + 0.01, name, detail);
}

void check_seed_independence(cuda::CudaBatchSampler& gpu, int32_t vocab) {
  const Tensor logits = random_logits(8, vocab, 1.0f);
  std::vector<Sequence> seqs;
  for (int i = 0; i < 8; ++i) seqs.push_back(make_seq(i, vocab, 5, 2));
  std::vector<SamplingRow> all;
  for (auto& s : seqs) all.push_back({&s, {}});
  const auto together = gpu.sample(logits, all, vocab);
  // Row 5 alone (its logits as row 0 of a one-row step) and in reverse order.
  Tensor alone_logits = Tensor::empty(DType::F32, {1, vocab});
  std::memcpy(alone_logits.raw(), row_of(logits, 5).data(), size_t(vocab) * 4);
  std::vector<SamplingRow> alone{{&seqs[5], {}}};
  const int32_t solo = gpu.sample(alone_logits, alone, vocab)[0].token;
  Sequence other = seqs[5];
  other.seed ^= 1;
  std::vector<SamplingRow> reseeded{{&other, {}}};
  int differs = 0;  // other seeds must give other draws now and then
  for (int k = 0; k < 16; ++k) {
    other.seed = seqs[5].seed + uint64_t(k + 1);
    differs += gpu.sample(alone_logits, reseeded, vocab)[0].token != solo;
  }
  report(together[5].token == solo && differs > 0, "seeded draw independent of the batch",
         "in batch " + std::to_string(together[5].token) + ", alone " + std::to_string(solo) + "; " +
             std::to_string(differs) + "/16 other seeds drew another token");
}

void check_logprobs(cuda::CudaBatchSampler& gpu, int32_t vocab) {
  auto seqs = processor_rows(vocab);
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i].params.logprobs = int32_t(i % 21);
  const Tensor logits = random_logits(int64_t(seqs.size()), vocab, 4.0f);
  std::vector<SamplingRow> rows;
  for (size_t i = 0; i < seqs.size(); ++i) rows.push_back({&seqs[i], bans_for(i)});
  const auto got = gpu.sample(logits, rows, vocab);
  const auto want = make_cpu_batch_sampler()->sample(logits, rows, vocab);
  double worst = 0;
  int64_t id_mismatch = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const TokenLogprob& g = got[i].logprob;
    const TokenLogprob& w = want[i].logprob;
    id_mismatch += g.token != w.token || g.top.size() != w.top.size();
    if (std::isfinite(w.logprob) || std::isfinite(g.logprob)) worst = std::max(worst, double(std::abs(g.logprob - w.logprob)));
    for (size_t j = 0; j < std::min(g.top.size(), w.top.size()); ++j) {
      id_mismatch += g.top[j].first != w.top[j].first;
      worst = std::max(worst, double(std::abs(g.top[j].second - w.top[j].second)));
    }
  }
  char detail[128];
  std::snprintf(detail, sizeof detail, "max |gpu - cpu| %.3g over chosen + top-N; %ld id mismatches", worst, long(id_mismatch));
  report(worst <= 1e-4 && id_mismatch == 0, "logprobs within 1e-4 of the CPU", detail);
}

void time_steps(cuda::CudaBatchSampler& gpu, int32_t vocab) {
  for (int64_t batch : {1, 32, 256}) {
    const Tensor logits = random_logits(batch, vocab, 2.0f);
    std::vector<Sequence> seqs;
    for (int64_t i = 0; i < batch; ++i) seqs.push_back(make_seq(i, vocab, 64, 16));
    for (bool greedy : {true, false}) {
      std::vector<SamplingRow> rows;
      for (auto& s : seqs) {
        s.params = {};
        if (greedy) s.params.temperature = 0;
        else s.params.top_p = 0.9f, s.params.top_k = 50, s.params.repetition_penalty = 1.1f;
        rows.push_back({&s, {}});
      }
      gpu.sample(logits, rows, vocab);  // warm-up
      const auto t0 = std::chrono::steady_clock::now();
      const int reps = 20;
      for (int k = 0; k < reps; ++k) gpu.sample(logits, rows, vocab);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("timing: vocab %d, batch %3ld, %-28s %8.1f us per step (host logits uploaded)\n", vocab, long(batch),
                  greedy ? "greedy" : "top-k 50 + top-p 0.9 + rep 1.1", us);
    }
  }
}

}  // namespace
}  // namespace mx

int main(int argc, char** argv) {
  using namespace mx;
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  int32_t vocab = 49152;  // SmolLM2's vocabulary
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seed")) seed = std::stoull(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--vocab")) vocab = std::stoi(argv[i + 1]);
  }
  rng.seed(seed);
  std::printf("sampler_parity: seed %llu, vocab %d\n", static_cast<unsigned long long>(seed), vocab);
  try {
    cuda::CudaBatchSampler gpu(0);
    check_processing_and_greedy(gpu, vocab);
    check_greedy_ties(gpu, vocab);
    const int32_t small = 2000;  // frequency checks need many draws per allowed token
    check_filters(gpu, "temperature 0.8 only", small, [](SamplingParams& p) { p.temperature = 0.8f; });
    check_filters(gpu, "top-k 20", small, [](SamplingParams& p) { p.top_k = 20; });
    check_filters(gpu, "top-p 0.5", small, [](SamplingParams& p) { p.top_p = 0.5f; });
    check_filters(gpu, "min-p 0.2", small, [](SamplingParams& p) { p.min_p = 0.2f; });
    check_filters(gpu, "top-k 40 + min-p 0.05 + top-p 0.8, T 1.3", small, [](SamplingParams& p) {
      p.top_k = 40, p.min_p = 0.05f, p.top_p = 0.8f, p.temperature = 1.3f;
    });
    check_filters(gpu, "top-k 1 (a greedy draw)", small, [](SamplingParams& p) { p.top_k = 1; });
    check_seed_independence(gpu, vocab);
    check_logprobs(gpu, vocab);
    time_steps(gpu, vocab);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 2;
  }
  std::printf("%s: %d failed checks\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
