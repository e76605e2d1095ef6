#include "cuda/sampling/cuda_batch_sampler.h"

#include <cstring>

#include "core/error.h"

namespace mx::cuda {
namespace {

size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

// The step's upload: row parameters, then the three sparse entry lists.
struct Packed {
  std::vector<SamplingRowParams> params;
  std::vector<BiasEntry> biases;
  std::vector<PenaltyEntry> penalties;
  std::vector<int32_t> bans;
};

// Sparse penalty entries of one sequence: every distinct token it holds when
// the repetition penalty is on (the CPU rule covers prompt and output), else
// only its output tokens; each with its count among the output tokens.
// `slot` is vocab-sized scratch, all -1 on entry and on return.
void add_penalty_entries(const Sequence& seq, int32_t vocab, std::vector<int32_t>& slot, std::vector<PenaltyEntry>& out) {
  const SamplingParams& p = seq.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  if (!repetition && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  const size_t first = out.size();
  const size_t begin = repetition ? 0 : size_t(seq.num_prompt_tokens);
  for (size_t i = begin; i < seq.tokens.size(); ++i) {
    const int32_t t = seq.tokens[i];
    if (t < 0 || t >= vocab) continue;
    if (slot[size_t(t)] < 0) {
      slot[size_t(t)] = int32_t(out.size());
      out.push_back({t, 0});
    }
    if (int64_t(i) >= seq.num_prompt_tokens) ++out[size_t(slot[size_t(t)])].output_count;
  }
  for (size_t e = first; e < out.size(); ++e) slot[size_t(out[e].token)] = -1;
}

Packed pack(std::span<SamplingRow> rows, int32_t vocab) {
  Packed k;
  std::vector<int32_t> slot(size_t(vocab), -1);
  for (size_t r = 0; r < rows.size(); ++r) {
    const Sequence& seq = *rows[r].seq;
    const SamplingParams& p = seq.params;
    SamplingRowParams rp;
    rp.temperature = p.temperature;
    rp.top_p = p.top_p;
    rp.min_p = p.min_p;
    rp.repetition_penalty = p.repetition_penalty;
    rp.presence_penalty = p.presence_penalty;
    rp.frequency_penalty = p.frequency_penalty;
    rp.top_k = p.top_k;
    rp.greedy = p.greedy() ? 1 : 0;
    rp.num_logprobs = p.logprobs < 0 ? -1 : std::min(p.logprobs, kMaxTopLogprobs);
    rp.logits_row = int32_t(r);
    rp.seed = seq.seed;
    rp.step = uint64_t(seq.num_output_tokens());
    rp.bias_begin = int32_t(k.biases.size());
    for (const auto& [id, bias] : p.logit_bias)
      if (id >= 0 && id < vocab) k.biases.push_back({id, bias});
    rp.bias_end = int32_t(k.biases.size());
    rp.penalty_begin = int32_t(k.penalties.size());
    add_penalty_entries(seq, vocab, slot, k.penalties);
    rp.penalty_end = int32_t(k.penalties.size());
    rp.ban_begin = int32_t(k.bans.size());
    for (int32_t t : rows[r].banned)
      if (t >= 0 && t < vocab) k.bans.push_back(t);
    rp.ban_end = int32_t(k.bans.size());
    k.params.push_back(rp);
  }
  return k;
}

}  // namespace

CudaBatchSampler::CudaBatchSampler(int device_index) : device_(device_index) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

CudaBatchSampler::~CudaBatchSampler() {
  for (Buffer* b : {&upload_host_, &upload_dev_, &logits_dev_, &work_, &probs_, &results_dev_, &results_host_}) release(*b);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaBatchSampler::check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("CUDA sampler (GPU {}): {} failed: {}", device_, what, cudaGetErrorString(err));
}

void CudaBatchSampler::release(Buffer& b) {
  if (b.ptr) b.host ? cudaFreeHost(b.ptr) : cudaFree(b.ptr);
  b.ptr = nullptr;
  b.bytes = 0;
}

void CudaBatchSampler::reserve(Buffer& b, size_t bytes, const char* what) {
  if (bytes <= b.bytes) return;
  // Nothing in flight uses the old buffer: every sample() call ends synchronized.
  release(b);
  bytes = std::max(bytes, size_t(4096));
  check(b.host ? cudaMallocHost(&b.ptr, bytes) : cudaMalloc(&b.ptr, bytes), what);
  b.bytes = bytes;
}

std::vector<SampledToken> CudaBatchSampler::sample(const Tensor& logits, std::span<SamplingRow> rows,
                                                   int32_t vocab_limit) {
  std::vector<SampledToken> out(rows.size());
  if (rows.empty()) return out;
  MX_CHECK(logits.dtype() == DType::F32 && logits.ndim() == 2, "CUDA sampler: expected F32 [rows, vocab] logits, got {}",
           logits.describe());
  MX_CHECK(int64_t(rows.size()) <= logits.dim(0), "model returned {} logit rows, the step needs {}", logits.dim(0),
           rows.size());
  MX_CHECK(vocab_limit > 0 && vocab_limit <= logits.dim(1), "vocab limit {} vs {} logits", vocab_limit, logits.dim(1));
  check(cudaSetDevice(device_), "cudaSetDevice");  // the engine loop thread is not the one that built us
  const int64_t n = int64_t(rows.size());
  const float* logits_ptr = nullptr;
  if (logits.device() == Device::CUDA) {
    // The backend produced them on its own stream, which we cannot name: wait
    // for the device (the host would wait for the step's end anyway).
    check(cudaDeviceSynchronize(), "waiting for the step's logits");
    logits_ptr = logits.data<float>();
  } else {
    const size_t bytes = size_t(n) * size_t(logits.dim(1)) * sizeof(float);
    reserve(logits_dev_, bytes, "cudaMalloc (logits)");
    check(cudaMemcpyAsync(logits_dev_.ptr, logits.raw(), bytes, cudaMemcpyHostToDevice, stream_), "logits upload");
    logits_ptr = static_cast<const float*>(logits_dev_.ptr);
  }

  const Packed k = pack(rows, vocab_limit);
  const size_t params_bytes = align16(k.params.size() * sizeof(SamplingRowParams));
  const size_t bias_bytes = align16(k.biases.size() * sizeof(BiasEntry));
  const size_t penalty_bytes = align16(k.penalties.size() * sizeof(PenaltyEntry));
  const size_t ban_bytes = align16(k.bans.size() * sizeof(int32_t));
  const size_t total = params_bytes + bias_bytes + penalty_bytes + ban_bytes;
  reserve(upload_host_, total, "cudaMallocHost (sampling parameters)");
  reserve(upload_dev_, total, "cudaMalloc (sampling parameters)");
  auto* host = static_cast<uint8_t*>(upload_host_.ptr);
  std::memcpy(host, k.params.data(), k.params.size() * sizeof(SamplingRowParams));
  std::memcpy(host + params_bytes, k.biases.data(), k.biases.size() * sizeof(BiasEntry));
  std::memcpy(host + params_bytes + bias_bytes, k.penalties.data(), k.penalties.size() * sizeof(PenaltyEntry));
  std::memcpy(host + params_bytes + bias_bytes + penalty_bytes, k.bans.data(), k.bans.size() * sizeof(int32_t));
  check(cudaMemcpyAsync(upload_dev_.ptr, host, total, cudaMemcpyHostToDevice, stream_), "parameter upload");

  const size_t row_bytes = size_t(n) * size_t(vocab_limit) * sizeof(float);
  reserve(work_, row_bytes, "cudaMalloc (sampling work)");
  reserve(probs_, row_bytes, "cudaMalloc (sampling scratch)");
  reserve(results_dev_, size_t(n) * sizeof(SamplingRowResult), "cudaMalloc (sampling results)");
  reserve(results_host_, size_t(n) * sizeof(SamplingRowResult), "cudaMallocHost (sampling results)");

  auto* dev = static_cast<uint8_t*>(upload_dev_.ptr);
  SamplingLaunch launch;
  launch.logits = logits_ptr;
  launch.row_stride = logits.dim(1);
  launch.vocab = vocab_limit;
  launch.num_rows = int32_t(n);
  launch.params = reinterpret_cast<const SamplingRowParams*>(dev);
  launch.biases = reinterpret_cast<const BiasEntry*>(dev + params_bytes);
  launch.penalties = reinterpret_cast<const PenaltyEntry*>(dev + params_bytes + bias_bytes);
  launch.bans = reinterpret_cast<const int32_t*>(dev + params_bytes + bias_bytes + penalty_bytes);
  launch.work = static_cast<float*>(work_.ptr);
  launch.probs = static_cast<float*>(probs_.ptr);
  launch.results = static_cast<SamplingRowResult*>(results_dev_.ptr);
  launch_sample_rows(launch, stream_);
  check(cudaGetLastError(), "sampling kernel launch");
  check(cudaMemcpyAsync(results_host_.ptr, results_dev_.ptr, size_t(n) * sizeof(SamplingRowResult),
                        cudaMemcpyDeviceToHost, stream_), "result download");
  check(cudaStreamSynchronize(stream_), "sampling");
  last_rows_ = n;
  last_vocab_ = vocab_limit;

  const auto* results = static_cast<const SamplingRowResult*>(results_host_.ptr);
  for (int64_t r = 0; r < n; ++r) {
    const SamplingRowResult& res = results[r];
    MX_CHECK(res.token >= 0 && res.token < vocab_limit, "CUDA sampler returned token {} outside [0, {})", res.token,
             vocab_limit);
    SampledToken& t = out[size_t(r)];
    t.token = res.token;
    if (rows[size_t(r)].seq->params.logprobs >= 0) {
      t.logprob.token = res.token;
      t.logprob.logprob = res.logprob;
      for (int32_t j = 0; j < res.num_top; ++j) t.logprob.top.emplace_back(res.top_ids[j], res.top_logprobs[j]);
    }
  }
  return out;
}

Tensor CudaBatchSampler::last_processed_logits() {
  Tensor t = Tensor::empty(DType::F32, {last_rows_, int64_t(last_vocab_)});
  if (last_rows_ == 0) return t;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemcpy(t.raw(), work_.ptr, t.nbytes(), cudaMemcpyDeviceToHost), "processed logits download");
  return t;
}

std::unique_ptr<BatchSampler> make_cuda_batch_sampler(int device_index) {
  return std::make_unique<CudaBatchSampler>(device_index);
}

}  // namespace mx::cuda
