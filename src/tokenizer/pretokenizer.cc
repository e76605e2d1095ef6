#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "core/error.h"

namespace mx {
namespace {

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

// Match data is per thread so one compiled tokenizer can serve many threads.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(8, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  MatchData() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchData() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchData& thread_match_data() {
  thread_local MatchData md;
  return md;
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail_input("pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", offset,
               reinterpret_cast<const char*>(message), pattern);
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(as_code(code_)); }

void Regex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  MatchData& md = thread_match_data();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    // Text is valid UTF-8 here (the tokenizer sanitizes input first).
    int rc = jit_ ? pcre2_jit_match(as_code(code_), subject, text.size(), pos, 0, md.data, md.context)
                  : pcre2_match(as_code(code_), subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.data, md.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("pre-tokenizer regex failed to match: {}", reinterpret_cast<const char*>(message));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md.data);
    size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {
      // Empty match: step over one code point so the scan always advances.
      if (begin >= text.size()) return;
      size_t next = begin + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      pos = next;
      continue;
    }
    on_match(begin, end);
    pos = end;
  }
}

void PreTokenizer::add_step(const std::string& pattern, SplitBehavior behavior) {
  steps_.push_back(Step{std::make_shared<Regex>(pattern), behavior});
}

void PreTokenizer::split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const {
  split_from(0, text, on_piece);
}

void PreTokenizer::split_from(size_t step, std::string_view text,
                              const std::function<void(std::string_view)>& on_piece) const {
  if (text.empty()) return;
  if (step == steps_.size()) {
    on_piece(text);
    return;
  }
  const Step& s = steps_[step];
  size_t last = 0;
  auto emit = [&](size_t b, size_t e) {
    if (e > b) split_from(step + 1, text.substr(b, e - b), on_piece);
  };
  bool keep_gaps = s.behavior != SplitBehavior::kMatchesOnly;
  bool keep_matches = s.behavior != SplitBehavior::kRemoved;
  s.regex->for_each_match(text, [&](size_t b, size_t e) {
    if (keep_gaps) emit(last, b);
    if (keep_matches) emit(b, e);
    last = e;
  });
  if (keep_gaps) emit(last, text.size());
}

namespace patterns {
// Alternatives 2 and 3 of Kimi's pattern use `[X&&[^\p{Han}]]`; `(?!\p{Han})`
// before the class gives the same set. The reference (tiktoken, Rust regex)
// reads `\p{Han}` as Script=Han, which PCRE2 >= 10.40 spells `\p{sc:Han}`
// (its bare `\p{Han}` is Script_Extensions and would take in CJK punctuation
// such as U+3002, splitting "。\n" differently).
#define MX_HAN R"(\p{sc:Han})"
#define MX_KIMI_UPPER "(?:(?!" MX_HAN R"()[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]))"
#define MX_KIMI_LOWER "(?:(?!" MX_HAN R"()[\p{Ll}\p{Lm}\p{Lo}\p{M}]))"
const char* const kKimi =
    "[" MX_HAN "]+"
    R"(|[^\r\n\p{L}\p{N}]?)" MX_KIMI_UPPER "*" MX_KIMI_LOWER R"(+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?)" MX_KIMI_UPPER "+" MX_KIMI_LOWER R"(*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";
#undef MX_HAN
#undef MX_KIMI_UPPER
#undef MX_KIMI_LOWER
const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepSeekV3Digits = R"(\p{N}{1,3})";
const char* const kDeepSeekV3Cjk = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
const char* const kDeepSeekV3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}  // namespace patterns

PreTokenizer pretokenizer_for_gguf_pre(const std::string& name) {
  PreTokenizer p;
  if (name == "default" || name == "gpt2" || name == "gpt-2") {
    p.add_step(patterns::kGpt2, SplitBehavior::kIsolated);
  } else if (name == "llama3" || name == "llama-bpe" || name == "llama-v3") {
    p.add_step(patterns::kLlama3, SplitBehavior::kIsolated);
  } else if (name == "qwen2") {
    p.add_step(patterns::kQwen2, SplitBehavior::kIsolated);
  } else if (name == "smollm") {
    // SmolLM/SmolLM2's tokenizer.json: Digits(individual_digits) then ByteLevel's GPT-2 regex.
    p.add_step(R"(\p{N})", SplitBehavior::kIsolated);
    p.add_step(patterns::kGpt2, SplitBehavior::kIsolated);
  } else if (name == "deepseek-v3") {
    p.add_step(patterns::kDeepSeekV3Digits, SplitBehavior::kIsolated);
    p.add_step(patterns::kDeepSeekV3Cjk, SplitBehavior::kIsolated);
    p.add_step(patterns::kDeepSeekV3Main, SplitBehavior::kIsolated);
  } else if (name == "kimi-k2") {
    p.add_step(patterns::kKimi, SplitBehavior::kMatchesOnly);
  } else {
    fail_input("unknown GGUF pre-tokenizer '{}' (known: default, gpt2, llama-bpe, qwen2, smollm, deepseek-v3, kimi-k2)",
               name);
  }
  return p;
}

}  // namespace mx
