// The byte-pair merge step of byte-level BPE, on raw bytes. Two merge rules:
//  - rank rule (tiktoken): merge the adjacent pair whose concatenated bytes is
//    the token of lowest rank (= id);
//  - merge-list rule (HF tokenizer.json, GGUF): merge the adjacent pair of
//    tokens that comes first in the merges list.
// Ties go to the leftmost pair in both, as the reference implementations do.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/bytes_index.h"

namespace mx {

class BpeModel {
 public:
  // tiktoken: token i has bytes ranks[i] and rank i.
  static BpeModel from_ranks(std::vector<std::string> token_bytes);
  // HF/GGUF: vocabulary by id (missing ids have no entry), merges as byte-string
  // pairs in priority order. ignore_merges: a piece that is a whole token is
  // emitted as is (HF's BPE.ignore_merges, set by Llama-3). unk_id: used for a
  // byte with no token (else the byte is dropped, as HF does without unk).
  static BpeModel from_merges(std::vector<std::optional<std::string>> vocab,
                              const std::vector<std::pair<std::string, std::string>>& merges,
                              bool ignore_merges, std::optional<int32_t> unk_id);

  // Appends the ids of one pre-tokenized piece (raw bytes).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  bool has(int32_t id) const { return id >= 0 && id < size() && present_[id]; }
  const std::string& bytes_of(int32_t id) const { return bytes_[id]; }
  std::optional<int32_t> find(std::string_view bytes) const { return index_.find(bytes); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void encode_by_merges(std::string_view piece, std::vector<int32_t>& out) const;

  bool rank_rule_ = true;
  bool ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  std::vector<std::string> bytes_;
  std::vector<bool> present_;
  BytesIndex index_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<int32_t> byte_ids_;  // id of each single byte, -1 when absent
};

}  // namespace mx
