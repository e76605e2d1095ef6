#include "bench/numpy_random.h"

#include <array>

#include "core/error.h"

namespace mx::bench {
namespace {

// SeedSequence constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5;
constexpr uint32_t kMultA = 0x931e8875;
constexpr uint32_t kInitB = 0x8b51f9dd;
constexpr uint32_t kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd;
constexpr uint32_t kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// An integer entropy becomes little-endian 32-bit words; 0 is one zero word.
std::vector<uint32_t> entropy_words(uint64_t entropy) {
  std::vector<uint32_t> words;
  do {
    words.push_back(uint32_t(entropy & 0xffffffffu));
    entropy >>= 32;
  } while (entropy != 0);
  return words;
}

std::array<uint32_t, kPoolSize> mix_entropy(const std::vector<uint32_t>& entropy) {
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i)
    pool[i] = hashmix(i < int(entropy.size()) ? entropy[i] : 0u, hash_const);
  for (int src = 0; src < kPoolSize; ++src)
    for (int dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
  for (size_t src = kPoolSize; src < entropy.size(); ++src)
    for (int dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));
  return pool;
}

constexpr unsigned __int128 kPcgMultiplier =
    (unsigned __int128)(0x2360ED051FC65DA4ULL) << 64 | 0x4385DF649FCCF645ULL;

uint64_t rotr64(uint64_t value, unsigned rot) {
  return (value >> rot) | (value << ((-rot) & 63));
}

// numpy's Lemire variant for ranges that fit 32 bits: uses next_uint32.
uint64_t bounded_lemire32(Pcg64& rng, uint32_t range_incl) {
  const uint32_t range_excl = range_incl + 1;
  uint64_t m = uint64_t(rng.next_uint32()) * range_excl;
  uint32_t leftover = uint32_t(m);
  if (leftover < range_excl) {
    const uint32_t threshold = (UINT32_MAX - range_incl) % range_excl;
    while (leftover < threshold) {
      m = uint64_t(rng.next_uint32()) * range_excl;
      leftover = uint32_t(m);
    }
  }
  return m >> 32;
}

uint64_t bounded_lemire64(Pcg64& rng, uint64_t range_incl) {
  const uint64_t range_excl = range_incl + 1;
  unsigned __int128 m = (unsigned __int128)rng.next_uint64() * range_excl;
  uint64_t leftover = uint64_t(m);
  if (leftover < range_excl) {
    const uint64_t threshold = (UINT64_MAX - range_incl) % range_excl;
    while (leftover < threshold) {
      m = (unsigned __int128)rng.next_uint64() * range_excl;
      leftover = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

}  // namespace

std::vector<uint64_t> seed_sequence_state(uint64_t entropy, int n_words) {
  const auto pool = mix_entropy(entropy_words(entropy));
  std::vector<uint32_t> words32(size_t(n_words) * 2);
  uint32_t hash_const = kInitB;
  for (size_t i = 0; i < words32.size(); ++i) {
    uint32_t value = pool[i % kPoolSize];
    value ^= hash_const;
    hash_const *= kMultB;
    value *= hash_const;
    value ^= value >> kXShift;
    words32[i] = value;
  }
  std::vector<uint64_t> out(n_words);
  for (int i = 0; i < n_words; ++i)
    out[i] = uint64_t(words32[2 * i]) | uint64_t(words32[2 * i + 1]) << 32;
  return out;
}

Pcg64::Pcg64(uint64_t seed) {
  // PCG64._seed_seq: 4 words -> (state hi, state lo, inc hi, inc lo).
  const auto words = seed_sequence_state(seed, 4);
  const unsigned __int128 init_state = (unsigned __int128)words[0] << 64 | words[1];
  const unsigned __int128 init_seq = (unsigned __int128)words[2] << 64 | words[3];
  state_ = 0;
  inc_ = (init_seq << 1) | 1;
  step();
  state_ += init_state;
  step();
}

void Pcg64::step() { state_ = state_ * kPcgMultiplier + inc_; }

uint64_t Pcg64::next_uint64() {
  step();
  return rotr64(uint64_t(state_ >> 64) ^ uint64_t(state_), unsigned(state_ >> 122));
}

uint32_t Pcg64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return buffered_uint32_;
  }
  const uint64_t next = next_uint64();
  has_uint32_ = true;
  buffered_uint32_ = uint32_t(next >> 32);
  return uint32_t(next);
}

std::vector<int64_t> integers(Pcg64& rng, int64_t low, int64_t high, int64_t n) {
  if (low >= high) fail_input("integers: low ({}) must be below high ({})", low, high);
  if (n < 0) fail_input("integers: negative size {}", n);
  const uint64_t range_incl = uint64_t(high) - uint64_t(low) - 1;
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) {
    uint64_t draw;
    if (range_incl == 0) {
      draw = 0;
    } else if (range_incl < 0xffffffffULL) {
      draw = bounded_lemire32(rng, uint32_t(range_incl));
    } else if (range_incl == 0xffffffffULL) {
      draw = rng.next_uint32();
    } else if (range_incl == UINT64_MAX) {
      draw = rng.next_uint64();
    } else {
      draw = bounded_lemire64(rng, range_incl);
    }
    v = int64_t(uint64_t(low) + draw);
  }
  return out;
}

}  // namespace mx::bench
