// A compact open-addressing hash map from byte strings to token ids. Encoding
// looks up every candidate merge here, so it is the hot path: one flat probe
// array, keys stored back to back in one arena, no per-key allocation.
#pragma once
#include <cstdint>
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
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then a final mix for the low bits
    for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
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
