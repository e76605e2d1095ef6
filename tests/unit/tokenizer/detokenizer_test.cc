// UTF-8 handling and the incremental detokenizer.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/utf8.h"

namespace mx {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, DecodeReplaceFollowsPythonMaximalSubparts) {
  EXPECT_EQ(utf8::decode_replace("abc"), "abc");
  EXPECT_EQ(utf8::decode_replace("\xE4\xB8"), kReplacement);              // truncated: one U+FFFD
  EXPECT_EQ(utf8::decode_replace("\xE4\xB8" "A"), kReplacement + "A");
  EXPECT_EQ(utf8::decode_replace("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(utf8::decode_replace("\xF0\x80"), kReplacement + kReplacement);  // overlong lead
  EXPECT_EQ(utf8::decode_replace("\xC0\xAF"), kReplacement + kReplacement);
  EXPECT_EQ(utf8::decode_replace("\xF4\x90\x80\x80"), std::string() + kReplacement + kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(utf8::decode_replace("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(Utf8, CompletePrefixHoldsOnlyCompletableTails) {
  EXPECT_EQ(utf8::complete_prefix_length("ab\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8::complete_prefix_length("ab\xFF"), 3u);      // can never complete: emit now
  EXPECT_EQ(utf8::complete_prefix_length("ab\xE4" "A"), 4u);
  EXPECT_EQ(utf8::complete_prefix_length("\x80"), 1u);
}

// A tokenizer whose tokens are the 256 single bytes.
BpeTokenizer byte_tokenizer() {
  BpeTokenizerParts p;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  p.model = BpeModel::from_ranks(tokens);
  p.added_tokens = {AddedToken{"<s>", 256, true, false}};
  return BpeTokenizer(std::move(p));
}

TEST(IncrementalDetokenizer, NeverSplitsACharacter) {
  auto tok = byte_tokenizer();
  std::string text = "a\xE4\xB8\xAD" "b\xF0\x9F\x98\x80";
  IncrementalDetokenizer d(tok, false);
  std::vector<std::string> deltas;
  for (unsigned char c : text) deltas.push_back(d.push(c));
  deltas.push_back(d.finish());
  EXPECT_EQ(deltas, (std::vector<std::string>{"a", "", "", "\xE4\xB8\xAD", "b", "", "", "", "\xF0\x9F\x98\x80", ""}));
}

TEST(IncrementalDetokenizer, ConcatenationEqualsFullDecodeOnRandomBytes) {
  auto tok = byte_tokenizer();
  std::mt19937 rng(7);
  // Bias towards UTF-8 lead/continuation bytes so broken sequences are common.
  const int pool[] = {'a', ' ', 0x80, 0x9F, 0xA0, 0xBF, 0xC3, 0xE4, 0xED, 0xF0, 0xF4, 0xFF, 0xB8, 0xAD, 256};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> ids(rng() % 12);
    for (auto& id : ids) id = pool[rng() % std::size(pool)];
    for (bool skip : {false, true}) {
      IncrementalDetokenizer d(tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        std::string delta = d.push(id);
        ASSERT_EQ(utf8::decode_replace(delta), delta) << "delta is not valid UTF-8";
        streamed += delta;
      }
      streamed += d.finish();
      ASSERT_EQ(streamed, tok.decode(ids, skip)) << "trial " << trial;
    }
  }
}

TEST(IncrementalDetokenizer, SkipsSpecialTokensWhenAsked) {
  auto tok = byte_tokenizer();
  IncrementalDetokenizer keep(tok, false), skip(tok, true);
  EXPECT_EQ(keep.push(256), "<s>");
  EXPECT_EQ(skip.push(256), "");
}

}  // namespace
}  // namespace mx
