// The engine's BatchSampler on the GPU (engine/batch_sampler.h): packs each
// row's sampling parameters and sparse lists (logit_bias, the tokens a
// sequence has seen with their output counts, banned stop tokens) into one
// upload, runs sampling_kernels.cu over the step's logits where the model left
// them, and downloads only the chosen tokens and requested logprobs.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "cuda/sampling/sampling_kernels.h"
#include "engine/batch_sampler.h"

namespace mx::cuda {

class CudaBatchSampler : public BatchSampler {
 public:
  explicit CudaBatchSampler(int device_index);
  ~CudaBatchSampler() override;
  CudaBatchSampler(const CudaBatchSampler&) = delete;
  CudaBatchSampler& operator=(const CudaBatchSampler&) = delete;

  // logits in device memory are read in place (after the device has finished
  // producing them); host logits are uploaded first.
  std::vector<SampledToken> sample(const Tensor& logits, std::span<SamplingRow> rows, int32_t vocab_limit) override;
  bool wants_device_logits() const override { return true; }
  std::string name() const override { return "cuda"; }

  // Host copy of the last sample() call's processed logits F32 [rows, vocab_limit]:
  // banned tokens, logit_bias and penalties applied (parity tests).
  Tensor last_processed_logits();

 private:
  // A grow-only buffer (device or pinned host).
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
    bool host = false;
  };
  void reserve(Buffer& b, size_t bytes, const char* what);
  void release(Buffer& b);
  void check(cudaError_t err, const char* what);

  int device_;
  cudaStream_t stream_ = nullptr;
  Buffer upload_host_{nullptr, 0, true}, upload_dev_, logits_dev_, work_, probs_, results_dev_,
      results_host_{nullptr, 0, true};
  int64_t last_rows_ = 0;
  int32_t last_vocab_ = 0;
};

std::unique_ptr<BatchSampler> make_cuda_batch_sampler(int device_index);

}  // namespace mx::cuda
