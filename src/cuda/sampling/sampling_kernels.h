// The batched sampling kernel's contract: plain C++ (compiled by both the host
// compiler and nvcc), so cuda_batch_sampler.cc packs its inputs without CUDA
// headers beyond the runtime API.
//
// One thread block per logits row does, in order (the CPU sampler's order,
// engine/sampler.cc):
//   1. work = logits[row, :vocab], banned tokens -> -inf;
//   2. logprobs of that raw row: log-sum-exp, the top-N alternatives;
//   3. logit_bias, then repetition penalty, then presence/frequency penalties
//      (sparse lists: only the tokens a sequence has seen are uploaded);
//   4. greedy argmax (ties: lowest id), or temperature + top-k + min-p + top-p
//      and a draw by Gumbel-max with Philox4x32-10 keyed by (seed, step, token),
//      so a seeded sequence draws the same whatever shares its batch.
// Only RowResult comes back to the host.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mx::cuda {

inline constexpr int kMaxTopLogprobs = 20;

struct SamplingRowParams {
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;         // <= 0 or >= vocab: off
  int32_t greedy = 0;
  int32_t num_logprobs = -1;  // -1: none; N >= 0: the chosen token's logprob and the top N
  int32_t logits_row = 0;
  uint64_t seed = 0;
  uint64_t step = 0;         // tokens generated so far: the Philox counter
  // Half-open ranges into the step's entry arrays.
  int32_t bias_begin = 0, bias_end = 0;
  int32_t penalty_begin = 0, penalty_end = 0;
  int32_t ban_begin = 0, ban_end = 0;
};

struct BiasEntry {
  int32_t token;
  float bias;
};

// A token the sequence holds (prompt or output): the repetition penalty
// applies to it; output_count > 0 also brings presence/frequency penalties.
struct PenaltyEntry {
  int32_t token;
  int32_t output_count;
};

struct SamplingRowResult {
  int32_t token;
  float logprob;  // of the raw (banned) distribution
  int32_t num_top;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

struct SamplingLaunch {
  const float* logits = nullptr;  // [rows of the step, row_stride]
  int64_t row_stride = 0;
  int32_t vocab = 0;              // ids >= vocab are never sampled
  int32_t num_rows = 0;
  const SamplingRowParams* params = nullptr;
  const BiasEntry* biases = nullptr;
  const PenaltyEntry* penalties = nullptr;
  const int32_t* bans = nullptr;
  float* work = nullptr;          // [num_rows, vocab]: processed logits (after step 3)
  float* probs = nullptr;         // [num_rows, vocab]: scratch for the filters
  SamplingRowResult* results = nullptr;
};

void launch_sample_rows(const SamplingLaunch& launch, cudaStream_t stream);

}  // namespace mx::cuda
