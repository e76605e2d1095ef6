// Bit-exact reimplementation of the numpy random pieces the seed's benchmark
// client relies on: numpy.random.default_rng(seed) (SeedSequence -> PCG64) and
// Generator.integers(low, high) for int64 output (Lemire's bounded method as
// numpy implements it). The random dataset must produce the same prompts as
// the Python tool for the same --seed, so "close enough" is not an option.
#pragma once
#include <cstdint>
#include <vector>

namespace mx::bench {

// numpy.random.SeedSequence(entropy).generate_state(n_words, np.uint64) for a
// non-negative integer entropy and no spawn key.
std::vector<uint64_t> seed_sequence_state(uint64_t entropy, int n_words);

// numpy.random.PCG64: 128-bit LCG with the XSL-RR output, plus numpy's
// buffered 32-bit draws (one 64-bit output feeds two 32-bit draws).
class Pcg64 {
 public:
  // Same stream as numpy.random.default_rng(seed).
  explicit Pcg64(uint64_t seed);
  uint64_t next_uint64();
  uint32_t next_uint32();

 private:
  void step();
  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has_uint32_ = false;
  uint32_t buffered_uint32_ = 0;
};

// Generator.integers(low, high, size=n) with numpy's default int64 dtype:
// values uniform in [low, high). Throws mx::InvalidArgument when low >= high.
std::vector<int64_t> integers(Pcg64& rng, int64_t low, int64_t high, int64_t n);

}  // namespace mx::bench
