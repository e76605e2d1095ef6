#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <limits>
#include <queue>

#include "core/error.h"

namespace mx {
namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

// One live symbol of the piece being merged, in a doubly linked list.
struct Symbol {
  uint32_t start, end;
  int32_t prev, next;
  int32_t id;
};

// A candidate merge of symbol `left` with its right neighbour. Stale entries
// (either side changed since the push) are detected by the recorded ends.
struct Candidate {
  uint32_t rank;
  uint32_t start;  // left symbol's start: ties go to the leftmost pair
  int32_t left;
  uint32_t left_end, right_end;
  int32_t result;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : start > o.start;
  }
};

}  // namespace

BpeModel BpeModel::from_ranks(std::vector<std::string> token_bytes) {
  BpeModel m;
  m.rank_rule_ = true;
  m.present_.assign(token_bytes.size(), true);
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (!m.index_.insert(token_bytes[i], static_cast<int32_t>(i)))
      fail_input("BPE ranks: token {} repeats the bytes of an earlier token", i);
  }
  m.bytes_ = std::move(token_bytes);
  m.byte_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    if (auto id = m.index_.find(std::string_view(&c, 1))) m.byte_ids_[b] = *id;
  }
  return m;
}

BpeModel BpeModel::from_merges(std::vector<std::optional<std::string>> vocab,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               bool ignore_merges, std::optional<int32_t> unk_id) {
  BpeModel m;
  m.rank_rule_ = false;
  m.ignore_merges_ = ignore_merges;
  m.unk_id_ = unk_id;
  m.bytes_.resize(vocab.size());
  m.present_.assign(vocab.size(), false);
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (!vocab[i]) continue;
    m.present_[i] = true;
    m.bytes_[i] = std::move(*vocab[i]);
    // Duplicate strings: the first id wins, like a HF vocab map would hold one.
    m.index_.insert(m.bytes_[i], static_cast<int32_t>(i));
  }
  m.byte_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    if (auto id = m.index_.find(std::string_view(&c, 1))) m.byte_ids_[b] = *id;
  }
  m.merges_.reserve(merges.size() * 2);
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    auto ia = m.index_.find(a), ib = m.index_.find(b), ir = m.index_.find(a + b);
    if (!ia || !ib || !ir) fail_input("BPE merge {} ('{}' + '{}') uses a token missing from the vocabulary", r, a, b);
    // A pair listed twice keeps its first (highest-priority) rank.
    m.merges_.try_emplace(pair_key(*ia, *ib), Merge{static_cast<uint32_t>(r), *ir});
  }
  return m;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (rank_rule_ || ignore_merges_) {
    if (auto id = index_.find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  encode_by_merges(piece, out);
}

void BpeModel::encode_by_merges(std::string_view piece, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap_storage;
  symbols.clear();
  heap_storage.clear();
  for (uint32_t i = 0; i < piece.size(); ++i) {
    int32_t id = byte_ids_[static_cast<unsigned char>(piece[i])];
    if (id < 0) {
      if (rank_rule_) fail("BPE ranks have no token for byte {:#04x}", static_cast<unsigned char>(piece[i]));
      if (!unk_id_) continue;  // HF drops a byte it cannot represent when there is no unk
      id = *unk_id_;
    }
    int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{i, i + 1, n - 1, n + 1, id});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap(std::greater<>{},
                                                                              std::move(heap_storage));
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = symbols[left].next;
    if (right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    uint32_t rank = kNoRank;
    int32_t result = -1;
    if (rank_rule_) {
      if (auto id = index_.find(piece.substr(l.start, r.end - l.start))) rank = static_cast<uint32_t>(result = *id);
    } else {
      auto it = merges_.find(pair_key(l.id, r.id));
      if (it != merges_.end()) rank = it->second.rank, result = it->second.result;
    }
    if (rank != kNoRank) heap.push(Candidate{rank, l.start, left, l.end, r.end, result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& l = symbols[c.left];
    if (l.id < 0 || l.end != c.left_end || l.next < 0) continue;
    Symbol& r = symbols[l.next];
    if (r.end != c.right_end) continue;
    // Merge r into l.
    l.end = r.end;
    l.id = c.result;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    r.id = -1;
    push_pair(l.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace mx
