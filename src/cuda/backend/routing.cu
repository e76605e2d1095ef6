// MoE routing on the GPU, one block per token, matching src/ops/cpu_moe.cc
// decision for decision: the same float scores (exp in double rounded to float
// equals the host's correctly rounded expf), the same group scores (sum of
// the two best of a group), the same order of ties (lower index first) and the
// same double-precision normalization in selection order. So expert ids are
// identical to the CPU's and weights agree to the last bit for sigmoid routing.
#include <math_constants.h>

#include "cuda/backend/kernels.h"

namespace mx::cuda {
namespace {

constexpr int kThreads = 256;

struct Best {
  float value;
  int index;  // -1: none
};

// a before b: larger value, then lower index (-1 loses to everything).
__device__ __forceinline__ bool better(const Best& a, const Best& b) {
  if (b.index < 0) return a.index >= 0;
  if (a.index < 0) return false;
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ Best block_best(Best mine, Best* scratch) {
  for (int o = 16; o > 0; o /= 2) {
    Best other{__shfl_xor_sync(0xffffffffu, mine.value, o), __shfl_xor_sync(0xffffffffu, mine.index, o)};
    if (better(other, mine)) mine = other;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = mine;
  __syncthreads();
  Best b = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w)
    if (better(scratch[w], b)) b = scratch[w];
  __syncthreads();  // scratch is reused by the next call
  return b;
}

__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, scratch[w]);
  __syncthreads();
  return m;
}

__device__ double block_sum(double v, double* scratch) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0;
  for (int w = 0; w < kThreads / 32; ++w) s += scratch[w];
  __syncthreads();
  return s;
}

// exp rounded once to float, as the host's expf.
__device__ __forceinline__ float exp_f(float x) { return float(exp(double(x))); }

// Dynamic shared memory: prob[E], choice[E], taken[E].
__global__ void __launch_bounds__(kThreads)
    routing_kernel(const float* logits, const float* bias, RoutingLaunch p, int32_t* ids, float* weights) {
  extern __shared__ float smem[];
  const int E = int(p.experts);
  float* prob = smem;
  float* choice = smem + E;
  int* taken = reinterpret_cast<int*>(smem + 2 * E);
  __shared__ Best best_scratch[kThreads / 32];
  __shared__ float fscratch[kThreads / 32];
  __shared__ double dscratch[kThreads / 32];
  __shared__ int selected[kMaxRoutedTopK];
  const int64_t t = blockIdx.x;
  const float* l = logits + t * E;

  if (p.sigmoid) {
    for (int e = threadIdx.x; e < E; e += kThreads) {
      const float s = 1.0f / (1.0f + exp_f(-l[e]));
      prob[e] = s;
      choice[e] = s + (bias ? bias[e] : 0.0f);
      taken[e] = 0;
    }
  } else {
    float m = -CUDART_INF_F;
    for (int e = threadIdx.x; e < E; e += kThreads) m = fmaxf(m, l[e]);
    m = block_max(m, fscratch);
    double sum = 0;
    for (int e = threadIdx.x; e < E; e += kThreads) {
      prob[e] = exp_f(l[e] - m);
      sum += double(prob[e]);
    }
    sum = block_sum(sum, dscratch);
    for (int e = threadIdx.x; e < E; e += kThreads) {
      prob[e] = float(double(prob[e]) / sum);
      choice[e] = prob[e];
      taken[e] = 0;
    }
  }
  __syncthreads();

  if (p.sigmoid && p.n_group > 1) {
    // Group score = sum of its two best selection scores; keep the topk_group
    // best groups (ties: lower group first), the others' experts become -inf.
    const int groups = int(p.n_group), per = E / groups;
    __shared__ float group_score[kMaxRoutingGroups];
    __shared__ int group_keep[kMaxRoutingGroups];
    for (int g = threadIdx.x; g < groups; g += kThreads) {
      float m1 = -CUDART_INF_F, m2 = -CUDART_INF_F;
      for (int i = 0; i < per; ++i) {
        const float v = choice[g * per + i];
        if (v > m1) {
          m2 = m1;
          m1 = v;
        } else if (v > m2) {
          m2 = v;
        }
      }
      group_score[g] = per >= 2 ? 0.0f + m1 + m2 : 0.0f + m1;
    }
    __syncthreads();
    for (int g = threadIdx.x; g < groups; g += kThreads) {
      int rank = 0;
      for (int h = 0; h < groups; ++h)
        rank += group_score[h] > group_score[g] || (group_score[h] == group_score[g] && h < g);
      group_keep[g] = rank < p.topk_group;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += kThreads)
      if (!group_keep[e / per]) choice[e] = -CUDART_INF_F;
    __syncthreads();
  }

  for (int j = 0; j < p.top_k; ++j) {
    Best mine{0.0f, -1};
    for (int e = threadIdx.x; e < E; e += kThreads) {
      const Best c{choice[e], e};
      if (!taken[e] && better(c, mine)) mine = c;
    }
    const Best b = block_best(mine, best_scratch);
    if (threadIdx.x == 0) {
      selected[j] = b.index;
      taken[b.index] = 1;
    }
    __syncthreads();
  }

  if (threadIdx.x == 0) {
    double sum = 0;
    for (int j = 0; j < p.top_k; ++j) sum += prob[selected[j]];
    for (int j = 0; j < p.top_k; ++j) {
      float w = prob[selected[j]];
      if (p.normalize) w = float(w / (sum + 1e-20));
      ids[t * p.top_k + j] = selected[j];
      weights[t * p.top_k + j] = w * p.routed_scaling_factor;
    }
  }
}

}  // namespace

void launch_routing(const float* logits, const float* bias, const RoutingLaunch& p, int32_t* ids, float* weights,
                    cudaStream_t stream) {
  if (p.tokens == 0) return;
  const size_t smem = size_t(p.experts) * (2 * sizeof(float) + sizeof(int));
  routing_kernel<<<unsigned(p.tokens), kThreads, smem, stream>>>(logits, bias, p, ids, weights);
}

}  // namespace mx::cuda
