// Byte-level BPE: merge rules, added/special tokens, the real Kimi vocabulary.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"

namespace mx {
namespace {

std::vector<std::string> byte_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  return t;
}

std::vector<int32_t> encode_piece(const BpeModel& m, std::string_view piece) {
  std::vector<int32_t> out;
  m.encode_piece(piece, out);
  return out;
}

TEST(BpeModel, RankRuleMergesLowestRankFirst) {
  auto tokens = byte_tokens();
  tokens.push_back("bc");   // 256
  tokens.push_back("ab");   // 257
  tokens.push_back("abc");  // 258
  BpeModel m = BpeModel::from_ranks(tokens);
  // "abcd": bc (256) merges before ab (257); then a+bc -> abc (258).
  EXPECT_EQ(encode_piece(m, "abcd"), (std::vector<int32_t>{258, 'd'}));
  // Whole-piece shortcut: a token is emitted as is.
  EXPECT_EQ(encode_piece(m, "abc"), (std::vector<int32_t>{258}));
  EXPECT_EQ(encode_piece(m, "xab"), (std::vector<int32_t>{'x', 257}));
}

TEST(BpeModel, RankRuleTieGoesToLeftmostPair) {
  auto tokens = byte_tokens();
  tokens.push_back("aa");  // 256
  BpeModel m = BpeModel::from_ranks(tokens);
  EXPECT_EQ(encode_piece(m, "aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(encode_piece(m, "aaaaa"), (std::vector<int32_t>{256, 256, 'a'}));
}

TEST(BpeModel, MergeListNeedsTheListedPair) {
  std::vector<std::optional<std::string>> vocab;
  for (auto& t : byte_tokens()) vocab.push_back(t);
  vocab.push_back("ab");   // 256
  vocab.push_back("bc");   // 257
  vocab.push_back("abc");  // 258, only reachable as ab + c
  std::vector<std::pair<std::string, std::string>> merges = {{"b", "c"}, {"a", "b"}, {"ab", "c"}};
  BpeModel m = BpeModel::from_merges(vocab, merges, false, std::nullopt);
  // b+c merges first; a + bc is not a listed merge, so "abc" stays a, bc.
  EXPECT_EQ(encode_piece(m, "abc"), (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ(encode_piece(m, "abx"), (std::vector<int32_t>{256, 'x'}));
  // ignore_merges: a piece that is a token is taken whole.
  BpeModel whole = BpeModel::from_merges(vocab, merges, true, std::nullopt);
  EXPECT_EQ(encode_piece(whole, "abc"), (std::vector<int32_t>{258}));
}

TEST(BpeModel, MergeWithUnknownTokenIsRejected) {
  std::vector<std::optional<std::string>> vocab = {std::string("a"), std::string("b")};
  EXPECT_THROW(BpeModel::from_merges(vocab, {{"a", "b"}}, false, std::nullopt), InvalidArgument);
}

TEST(BpeModel, LongPieceIsLinearEnough) {
  auto tokens = byte_tokens();
  tokens.push_back("  ");    // 256
  tokens.push_back("    ");  // 257
  BpeModel m = BpeModel::from_ranks(tokens);
  std::string spaces(100000, ' ');
  auto ids = encode_piece(m, spaces);
  EXPECT_EQ(ids.size(), 25000u);
  for (int32_t id : ids) ASSERT_EQ(id, 257);
}

TEST(ByteUnicode, RoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string text = byte_unicode::encode(all);
  EXPECT_EQ(byte_unicode::char_for_byte(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(byte_unicode::char_for_byte('A'), "A");
  EXPECT_EQ(byte_unicode::decode(text).value(), all);
  EXPECT_FALSE(byte_unicode::decode("\xE4\xB8\xAD").has_value());  // '中' is no byte character
}

BpeTokenizerParts small_parts() {
  BpeTokenizerParts p;
  auto tokens = byte_tokens();
  tokens.push_back("he");
  tokens.push_back("hello");
  tokens.push_back("ll");
  tokens.push_back("llo");
  tokens.push_back("hell");
  p.model = BpeModel::from_ranks(tokens);
  p.pre_tokenizer.add_step(R"( ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+)", SplitBehavior::kMatchesOnly);
  AddedToken end{"<|end|>", 300, true, false};
  AddedToken tool{"<tool>", 301, false, true};
  p.added_tokens = {end, tool};
  p.eos_ids = {300};
  return p;
}

TEST(BpeTokenizer, SpecialsOnlyWhenAllowed) {
  BpeTokenizer tok(small_parts());
  auto allowed = tok.encode("hello<|end|>", true);
  EXPECT_EQ(allowed, (std::vector<int32_t>{257, 300}));
  auto plain = tok.encode("hello<|end|>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 300), 0);
  EXPECT_EQ(tok.decode(plain, false), "hello<|end|>");
  // A non-special added token is cut out either way (HF semantics).
  EXPECT_EQ(tok.encode("<tool>", false), (std::vector<int32_t>{301}));
  EXPECT_EQ(tok.decode(allowed, true), "hello");
  EXPECT_TRUE(tok.is_special(300));
  EXPECT_FALSE(tok.is_special(301));
  EXPECT_EQ(tok.token_to_id("<|end|>"), 300);
  EXPECT_EQ(tok.vocab_size(), 302);
}

TEST(BpeTokenizer, InvalidUtf8InputIsReplacedLikePython) {
  BpeTokenizer tok(small_parts());
  auto ids = tok.encode("a\xFF" "b", false);
  EXPECT_EQ(tok.decode(ids, false), "a\xEF\xBF\xBD" "b");
}

TEST(Normalizer, NfcComposes) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");      // e + combining acute -> é
  EXPECT_EQ(nfc("\xC3\xA9 abc"), "\xC3\xA9 abc");  // already NFC
  EXPECT_EQ(nfc("\xEF\xAC\x81"), "\xEF\xAC\x81");  // NFC keeps the ﬁ ligature (NFKC would not)
}

TEST(BpeTokenizer, UnknownIdIsAnInputError) {
  BpeTokenizer tok(small_parts());
  std::vector<int32_t> ids = {5000};
  EXPECT_THROW(tok.decode(ids, false), InvalidArgument);
}

std::unique_ptr<Tokenizer> load_kimi() {
  // tiktoken.model + tokenizer_config.json side by side, as in a model directory.
  auto src = std::filesystem::path(MX_SHARED_DIR) / "data/tokenizers/kimi";
  // One directory per process: ctest runs these tests in parallel processes.
  auto dir = std::filesystem::temp_directory_path() / ("mx_tok_kimi_unit_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (auto [from, to] : {std::pair{"tiktoken.model", "tiktoken.model"},
                          std::pair{"tokenizer_config.kimi-k2-instruct.json", "tokenizer_config.json"}}) {
    std::filesystem::copy_file(src / from, dir / to, std::filesystem::copy_options::overwrite_existing);
  }
  auto tok = load_tokenizer(dir);  // reads everything into memory
  std::filesystem::remove_all(dir);
  return tok;
}

TEST(KimiTokenizer, MatchesTiktokenOnKnownText) {
  auto tok = load_kimi();
  // Expected ids from Python tiktoken with Kimi's pattern and specials.
  EXPECT_EQ(tok->encode("Hello world, 你好世界! <|im_end|>", true),
            (std::vector<int32_t>{19180, 2695, 11, 220, 33845, 2243, 0, 220, 163586}));
  EXPECT_EQ(tok->encode("Hello world, 你好世界! <|im_end|>", false),
            (std::vector<int32_t>{19180, 2695, 11, 220, 33845, 2243, 0, 22652, 348, 11129, 91, 29}));
  EXPECT_EQ(tok->encode("I'M here", false), (std::vector<int32_t>{40, 103645, 2397}));
  EXPECT_EQ(tok->encode("12345", false), (std::vector<int32_t>{6694, 2899}));
}

TEST(KimiTokenizer, SpecialIdsAndEos) {
  auto tok = load_kimi();
  EXPECT_EQ(tok->vocab_size(), 163840);
  EXPECT_EQ(tok->token_to_id("[BOS]"), 163584);
  EXPECT_EQ(tok->token_to_id("<|im_middle|>"), 163601);
  EXPECT_EQ(tok->token_to_id("<|reserved_token_163700|>"), 163700);
  EXPECT_EQ(tok->token_bytes(163838), "[UNK]");
  EXPECT_EQ(tok->bos_id(), 163584);
  auto eos = tok->eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), 163585), eos.end());
  EXPECT_NE(std::find(eos.begin(), eos.end(), 163586), eos.end());
  EXPECT_FALSE(tok->add_bos());
  // tool-call markers are "special": false in the config: kept by skip_special decode.
  EXPECT_FALSE(tok->is_special(163597));
  EXPECT_TRUE(tok->is_special(163586));
}

TEST(GgufVocab, BuildsByteLevelTokenizer) {
  GgufVocab v;
  v.pre = "gpt2";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_unicode::char_for_byte(static_cast<unsigned char>(b)));
  v.tokens.push_back("\xC4\xA0h");  // "Ġh" = " h", 256
  v.tokens.push_back("\xC4\xA0hi");  // " hi", 257
  v.tokens.push_back("<|eot|>");    // 258, control
  v.merges = {"\xC4\xA0 h", "\xC4\xA0h i"};
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types[258] = 3;
  v.eos_id = 258;
  auto tok = make_bpe_from_gguf_vocab(v);
  EXPECT_EQ(tok->encode("a hi<|eot|>", true), (std::vector<int32_t>{'a', 257, 258}));
  EXPECT_EQ(tok->decode(tok->encode("a hi<|eot|>", false), false), "a hi<|eot|>");
  EXPECT_EQ(tok->token_to_id("\xC4\xA0hi"), 257);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{258});
  v.pre = "no-such-pre";
  try {
    make_bpe_from_gguf_vocab(v);
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos);
  }
}

}  // namespace
}  // namespace mx
