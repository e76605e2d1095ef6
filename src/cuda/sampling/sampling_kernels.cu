// Batched sampling on the GPU: one 1024-thread block per logits row (see
// sampling_kernels.h for the order of operations). The filters find their cut
// by a binary search over order-preserving 32-bit keys of the logits, so no
// row is ever sorted; ties at a cut are broken by lowest token id, as the CPU
// sampler's (logit desc, id asc) order does.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "cuda/sampling/sampling_kernels.h"

namespace mx::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

struct Best {
  float value;
  int32_t id;
};

// (value desc, id asc): the CPU sampler's order. NaN never wins.
__device__ __forceinline__ bool better(Best a, Best b) { return a.value > b.value || (a.value == b.value && a.id < b.id); }

__device__ __forceinline__ Best warp_best(Best b) {
  for (int o = 16; o; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, b.value, o), __shfl_xor_sync(0xffffffffu, b.id, o)};
    if (better(other, b)) b = other;
  }
  return b;
}

struct Shared {
  Best best[kWarps];
  double dsum[kWarps];
  float fmax[kWarps];
  int32_t count[kWarps];
};

__device__ Best block_best(Best b, Shared& s) {
  b = warp_best(b);
  __syncthreads();  // the scratch may still be read by a previous reduction
  if (threadIdx.x % 32 == 0) s.best[threadIdx.x / 32] = b;
  __syncthreads();
  b = s.best[0];
  for (int w = 1; w < kWarps; ++w)
    if (better(s.best[w], b)) b = s.best[w];
  return b;
}

__device__ double block_sum(double v, Shared& s) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.dsum[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < kWarps; ++w) v += s.dsum[w];
  return v;
}

__device__ float block_max(float v, Shared& s) {
  for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.fmax[threadIdx.x / 32] = v;
  __syncthreads();
  v = s.fmax[0];
  for (int w = 1; w < kWarps; ++w) v = fmaxf(v, s.fmax[w]);
  return v;
}

__device__ int32_t block_count(int32_t v, Shared& s) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.count[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < kWarps; ++w) v += s.count[w];
  return v;
}

// Exclusive prefix sum of one value per thread, in thread order.
__device__ int32_t block_exclusive_scan(int32_t v, Shared& s) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int32_t inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  __syncthreads();
  if (lane == 31) s.count[warp] = inclusive;
  __syncthreads();
  int32_t before = 0;
  for (int w = 0; w < warp; ++w) before += s.count[w];
  return before + inclusive - v;
}

// Larger float -> larger key; -0 and +0 share a key (they compare equal).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Philox4x32-10 (Salmon et al., SC'11), a counter-based generator: the draw of
// (seed, step, token) depends on nothing else.
__device__ uint4 philox(uint64_t seed, uint64_t step, uint32_t token) {
  uint32_t c0 = token, c1 = uint32_t(step), c2 = uint32_t(step >> 32), c3 = 0x5eed5eedu;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return make_uint4(c0, c1, c2, c3);
}

// Gumbel(0, 1) noise from 24 random bits: u in (0, 1) exactly.
__device__ __forceinline__ float gumbel(uint64_t seed, uint64_t step, uint32_t token) {
  const float u = (float(philox(seed, step, token).x >> 8) + 0.5f) * 0x1.0p-24f;
  return -logf(-logf(u));
}

// The largest key K with at least `need` tokens (prob > 0 when only_kept) of key >= K.
__device__ uint32_t kth_key(const float* work, const float* prob, int n, int need, bool only_kept, Shared& s) {
  uint32_t lo = 0, hi = 0xFFFFFFFFu;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2 + 1;
    int32_t c = 0;
    for (int i = threadIdx.x; i < n; i += kThreads) c += (!only_kept || prob[i] > 0.0f) && order_key(work[i]) >= mid;
    if (block_count(c, s) >= need) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The largest key K whose kept tokens of key >= K hold at least `target` mass.
__device__ uint32_t mass_key(const float* work, const float* prob, int n, double target, Shared& s) {
  uint32_t lo = 0, hi = 0xFFFFFFFFu;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2 + 1;
    double m = 0;
    for (int i = threadIdx.x; i < n; i += kThreads)
      if (prob[i] > 0.0f && order_key(work[i]) >= mid) m += prob[i];
    if (block_sum(m, s) >= target) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Keeps kept tokens with key > cut and the first `ties` (by id) with key == cut;
// zeroes the probability of every other token.
__device__ void keep_above(const float* work, float* prob, int n, uint32_t cut, int32_t ties, Shared& s) {
  const int chunk = (n + kThreads - 1) / kThreads;
  const int begin = min(n, int(threadIdx.x) * chunk), end = min(n, begin + chunk);
  int32_t mine = 0;
  for (int i = begin; i < end; ++i) mine += prob[i] > 0.0f && order_key(work[i]) == cut;
  int32_t rank = block_exclusive_scan(mine, s);
  for (int i = begin; i < end; ++i) {
    if (!(prob[i] > 0.0f)) continue;
    const uint32_t key = order_key(work[i]);
    if (key == cut) prob[i] = rank++ < ties ? prob[i] : 0.0f;
    else if (key < cut) prob[i] = 0.0f;
  }
  __syncthreads();
}

// Logprobs of the raw row: the log-sum-exp and the top N, best first.
__device__ float raw_logprobs(const float* work, int n, int top_n, SamplingRowResult& out, Shared& s) {
  const int tid = threadIdx.x;
  float mx = -INFINITY;
  for (int i = tid; i < n; i += kThreads) mx = fmaxf(mx, work[i]);
  mx = block_max(mx, s);
  double sum = 0;
  for (int i = tid; i < n; i += kThreads) sum += exp(double(work[i] - mx));
  const float lse = mx + float(log(block_sum(sum, s)));
  Best prev{INFINITY, -1};
  const int count = min(top_n, n);
  for (int j = 0; j < count; ++j) {
    Best b{-INFINITY, INT32_MAX};
    for (int i = tid; i < n; i += kThreads) {
      const Best c{work[i], i};
      if (better(prev, c) && better(c, b)) b = c;
    }
    b = block_best(b, s);
    if (tid == 0) {
      out.top_ids[j] = b.id;
      out.top_logprobs[j] = b.value - lse;
    }
    prev = b;
  }
  if (tid == 0) out.num_top = count;
  return lse;
}

__device__ void apply_bias_and_penalties(float* work, const SamplingRowParams& p, const SamplingLaunch& L) {
  const int tid = threadIdx.x;
  for (int e = p.bias_begin + tid; e < p.bias_end; e += kThreads) work[L.biases[e].token] += L.biases[e].bias;
  __syncthreads();
  // One thread per token: repetition, then presence/frequency, in the CPU's
  // float operations (no fused multiply-add, so the results match bit for bit).
  for (int e = p.penalty_begin + tid; e < p.penalty_end; e += kThreads) {
    const PenaltyEntry entry = L.penalties[e];
    float l = work[entry.token];
    if (p.repetition_penalty != 1.0f) l = l > 0 ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
    if (entry.output_count > 0 && (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f))
      l = __fsub_rn(l, __fadd_rn(__fmul_rn(p.frequency_penalty, float(entry.output_count)), p.presence_penalty));
    work[entry.token] = l;
  }
  __syncthreads();
}

// temperature, top-k, min-p, top-p, then a Gumbel-max draw among what is left.
__device__ int32_t sample_filtered(const float* work, float* prob, int n, const SamplingRowParams& p, Shared& s) {
  const int tid = threadIdx.x;
  const float mx = block_max([&] {
    float m = -INFINITY;
    for (int i = tid; i < n; i += kThreads) m = fmaxf(m, work[i]);
    return m;
  }(), s);
  if (mx == -INFINITY) return 0;  // everything masked: the CPU sampler returns its first candidate
  for (int i = tid; i < n; i += kThreads) prob[i] = float(exp(double(work[i] - mx) / double(p.temperature)));
  __syncthreads();
  if (p.top_k > 0 && p.top_k < n) {
    const uint32_t cut = kth_key(work, prob, n, p.top_k, false, s);
    int32_t above = 0;
    for (int i = tid; i < n; i += kThreads) above += order_key(work[i]) > cut;
    above = block_count(above, s);
    // keep_above only looks at kept tokens; top-k counts every token, so zero
    // probabilities (underflow) are counted the same either way: they sort last.
    keep_above(work, prob, n, cut, p.top_k - above, s);
  }
  if (p.min_p > 0.0f) {  // the most likely token has probability exp(0) = 1
    for (int i = tid; i < n; i += kThreads)
      if (prob[i] < p.min_p) prob[i] = 0.0f;
    __syncthreads();
  }
  if (p.top_p < 1.0f) {
    double total = 0;
    for (int i = tid; i < n; i += kThreads) total += prob[i];
    const double target = double(p.top_p) * block_sum(total, s);
    const uint32_t cut = mass_key(work, prob, n, target, s);
    double above = 0;
    float tie_prob = 0.0f;
    int32_t tied = 0;
    for (int i = tid; i < n; i += kThreads) {
      if (!(prob[i] > 0.0f)) continue;
      const uint32_t key = order_key(work[i]);
      if (key > cut) above += prob[i];
      else if (key == cut) tie_prob = prob[i], ++tied;
    }
    above = block_sum(above, s);
    tie_prob = block_max(tie_prob, s);
    tied = block_count(tied, s);
    int32_t ties = tied;
    if (tie_prob > 0.0f) ties = max(1, min(tied, int32_t(ceil((target - above) / double(tie_prob)))));
    keep_above(work, prob, n, cut, ties, s);
  }
  Best b{-INFINITY, INT32_MAX};
  for (int i = tid; i < n; i += kThreads) {
    if (!(prob[i] > 0.0f)) continue;
    const Best c{(work[i] - mx) / p.temperature + gumbel(p.seed, p.step, uint32_t(i)), i};
    if (better(c, b)) b = c;
  }
  b = block_best(b, s);
  return b.id == INT32_MAX ? 0 : b.id;
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SamplingLaunch L) {
  __shared__ Shared s;
  const int row = blockIdx.x, tid = threadIdx.x, n = L.vocab;
  const SamplingRowParams p = L.params[row];
  const float* logits = L.logits + int64_t(p.logits_row) * L.row_stride;
  float* work = L.work + int64_t(row) * n;
  float* prob = L.probs + int64_t(row) * n;
  SamplingRowResult& out = L.results[row];

  for (int i = tid; i < n; i += kThreads) work[i] = logits[i];
  __syncthreads();
  for (int e = p.ban_begin + tid; e < p.ban_end; e += kThreads) work[L.bans[e]] = -INFINITY;
  __syncthreads();
  float lse = 0;
  if (p.num_logprobs >= 0) lse = raw_logprobs(work, n, p.num_logprobs, out, s);
  apply_bias_and_penalties(work, p, L);

  int32_t token;
  if (p.greedy) {
    Best b{-INFINITY, INT32_MAX};
    for (int i = tid; i < n; i += kThreads)
      if (better(Best{work[i], i}, b)) b = Best{work[i], i};
    b = block_best(b, s);
    token = b.id == INT32_MAX ? 0 : b.id;
  } else {
    token = sample_filtered(work, prob, n, p, s);
  }
  if (tid == 0) {
    out.token = token;
    if (p.num_logprobs >= 0) {
      float raw = logits[token];
      for (int e = p.ban_begin; e < p.ban_end; ++e)
        if (L.bans[e] == token) raw = -INFINITY;
      out.logprob = raw - lse;
    }
  }
}

}  // namespace

void launch_sample_rows(const SamplingLaunch& launch, cudaStream_t stream) {
  if (launch.num_rows == 0) return;
  sample_rows_kernel<<<launch.num_rows, kThreads, 0, stream>>>(launch);
}

}  // namespace mx::cuda
