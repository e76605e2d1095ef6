// A deterministic toy model and tokenizer for engine tests. The model's KV
// "cache" stores a hash of (token, position) per slot; its next-token logits
// are a hash of every KV slot of the sequence read back through the block
// table. So a wrong block table, a reused block holding stale KV, a prefix
// hit on the wrong block or a wrong position all change the sampled tokens,
// and reading a slot that was never written throws.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace mx::test {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class FakeModel : public CausalLM {
 public:
  explicit FakeModel(int64_t vocab = 64) {
    config_.vocab_size = vocab;
    config_.eos_token_ids = {1};
    config_.model_type = "fake";
  }
  const ModelConfig& config() const override { return config_; }
  int64_t kv_bytes_per_token(KvCacheDtype) const override { return 8; }
  void allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) override {
    block_size_ = block_size;
    kv_.assign(size_t(num_blocks * block_size), kUnwritten);
    dtype_ = dtype;
  }
  Tensor forward(const ForwardBatch& batch) override {
    ++num_forward_calls;
    if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
    if (fail_next_forward) {
      fail_next_forward = false;
      fail("fake model failure");
    }
    int64_t rows = 0;
    for (const auto& s : batch.seqs) rows += s.need_logits;
    Tensor logits = Tensor::empty(DType::F32, {rows, config_.vocab_size});
    size_t offset = 0;
    int64_t row = 0;
    for (const auto& s : batch.seqs) {
      max_tokens_in_step = std::max<int64_t>(max_tokens_in_step, int64_t(batch.token_ids.size()));
      for (int64_t i = 0; i < s.num_new_tokens; ++i, ++offset) {
        const int64_t pos = s.num_cached_tokens + i;
        MX_CHECK(batch.positions[offset] == pos, "position {} != {}", batch.positions[offset], pos);
        slot(s, pos) = mix64(uint64_t(batch.token_ids[offset]) * 1000003ull + uint64_t(pos));
      }
      if (!s.need_logits) continue;
      uint64_t h = 0;
      for (int64_t pos = 0; pos < s.num_cached_tokens + s.num_new_tokens; ++pos) {
        const uint64_t v = slot(s, pos);
        MX_CHECK(v != kUnwritten, "read of unwritten KV at position {}", pos);
        h = mix64(h ^ v);
      }
      float* out = logits.data<float>() + row * config_.vocab_size;
      for (int64_t v = 0; v < config_.vocab_size; ++v)
        out[v] = float(mix64(h + uint64_t(v)) % 4096) / 512.0f;  // spread in [0, 8)
      ++row;
    }
    return logits;
  }
  std::string describe() const override { return "fake"; }

  int64_t num_forward_calls = 0;
  int64_t max_tokens_in_step = 0;
  std::atomic<bool> fail_next_forward{false};
  std::chrono::milliseconds step_delay{0};  // makes requests last long enough to overlap
  KvCacheDtype dtype_ = KvCacheDtype::Auto;

 private:
  static constexpr uint64_t kUnwritten = ~0ull;
  uint64_t& slot(const SequenceSlice& s, int64_t pos) {
    const size_t block = size_t(pos / block_size_);
    MX_CHECK(block < s.block_table.size(), "position {} beyond the block table ({} blocks)", pos, s.block_table.size());
    return kv_[size_t(s.block_table[block] * block_size_ + pos % block_size_)];
  }
  ModelConfig config_;
  int64_t block_size_ = 0;
  std::vector<uint64_t> kv_;
};

// Token 0 = <bos> and 1 = <eos> are special; token t >= 2 stands for one or two
// lowercase letters (t < 28: 'a'+t-2; otherwise two letters), so stop strings
// can span token boundaries. encode() maps each letter to its one-letter token
// (other bytes to some letter token).
class FakeTokenizer : public Tokenizer {
 public:
  explicit FakeTokenizer(int32_t vocab = 64) : vocab_(vocab) {}
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(c >= 'a' && c <= 'z' ? int32_t(c - 'a') + 2 : 2 + int32_t(static_cast<unsigned char>(c) % 26));
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids)
      if (!(skip_special && is_special(id))) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int32_t id) const override {
    if (id == 0) return "<bos>";
    if (id == 1) return "<eos>";
    if (id < 28) return std::string(1, char('a' + id - 2));
    return std::string{char('a' + id % 26), char('a' + (id / 26) % 26)};
  }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  int32_t vocab_size() const override { return vocab_; }
  bool is_special(int32_t id) const override { return id < 2; }
  std::optional<int32_t> bos_id() const override { return 0; }
  std::vector<int32_t> eos_ids() const override { return {1}; }
  bool add_bos() const override { return false; }

 private:
  int32_t vocab_;
};

}  // namespace mx::test
