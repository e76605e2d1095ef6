// A compact open-addressing hash map from byte strings to token ids. Encoding
// looks up every candidate merge here, so it is the hot path: one flat probe
// array, keys stored back to back in one arena, no per-key allocation.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mx {

class BytesIndex {
 public:
  // Inserts key -> id; returns false (and keeps the old id) if key exists.
  bool insert(std::string_view key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    uint64_t h = hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return std::nullopt;
      if (s.hash == static_cast<uint32_t>(h) && s.len == key.size() &&
          std::string_view(arena_.data() + s.offset, s.len) == key)
        return s.id;
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint32_t offset = 0, len = 0, hash = 0;
    int32_t id = -1;
  };
  static uint64_t hash(std::string_view key) {
    // 8 bytes at a time with a multiply-xorshift mix: tokens are short, and
    // this is hashed for every candidate merge.
    const char* p = key.data();
    size_t n = key.size();
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    h = (h ^ tail) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
  }
  void grow();

  std::string arena_;
  std::vector<Slot> slots_;
  size_t mask_ = 0, count_ = 0;
};

}  // namespace mx
