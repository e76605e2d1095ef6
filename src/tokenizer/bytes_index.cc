#include "tokenizer/bytes_index.h"

namespace mx {

void BytesIndex::grow() {
  size_t capacity = slots_.empty() ? 1024 : slots_.size() * 2;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    uint64_t h = hash(std::string_view(arena_.data() + s.offset, s.len));
    size_t i = h & mask_;
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

bool BytesIndex::insert(std::string_view key, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash(key);
  size_t i = h & mask_;
  for (; slots_[i].id >= 0; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.hash == static_cast<uint32_t>(h) && s.len == key.size() &&
        std::string_view(arena_.data() + s.offset, s.len) == key)
      return false;
  }
  slots_[i] = Slot{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()),
                   static_cast<uint32_t>(h), id};
  arena_.append(key);
  ++count_;
  return true;
}

}  // namespace mx
