// Splits text into the pieces BPE runs on, with PCRE2 (UTF + UCP, JIT when
// available). A pre-tokenizer is a sequence of regex steps, each applied to
// every piece the previous step produced (HF's pre_tokenizers.Sequence).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mx {

// What a step keeps (names follow HF's SplitDelimiterBehavior).
enum class SplitBehavior {
  kMatchesOnly,  // tiktoken: only the matches; text no alternative matches is dropped
  kIsolated,     // HF: matches and the gaps between them, each its own piece
  kRemoved,      // HF: only the gaps
};

class Regex {
 public:
  // pattern: PCRE2 syntax; compiled with UTF and UCP. Throws InvalidArgument
  // with PCRE2's message and offset when the pattern does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Calls on_match(begin, end) for each non-overlapping match, left to right.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

class PreTokenizer {
 public:
  void add_step(const std::string& pattern, SplitBehavior behavior);
  bool empty() const { return steps_.empty(); }
  // Calls on_piece for each piece, in order. With no steps the text is one piece.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;

 private:
  struct Step {
    std::shared_ptr<Regex> regex;
    SplitBehavior behavior;
  };
  void split_from(size_t step, std::string_view text, const std::function<void(std::string_view)>& on_piece) const;
  std::vector<Step> steps_;
};

// Pre-tokenizer regexes of known model families, in PCRE2 syntax.
namespace patterns {
// Kimi-K2's pattern. Its `[A&&[^\p{Han}]]` class intersections are written as
// `(?:(?!\p{Han})[A])` for PCRE2, which has no `&&`.
extern const char* const kKimi;
extern const char* const kGpt2;    // HF ByteLevel(use_regex=true), GPT-2 / SmolLM2
extern const char* const kLlama3;  // Llama-3 Split regex
extern const char* const kQwen2;   // Qwen2 Split regex
// DeepSeek-V3 applies three Split steps in this order.
extern const char* const kDeepSeekV3Digits;
extern const char* const kDeepSeekV3Cjk;
extern const char* const kDeepSeekV3Main;
}  // namespace patterns

// A pre-tokenizer for a GGUF `tokenizer.ggml.pre` name (the names llama.cpp
// uses), or throws InvalidArgument naming the unknown name.
PreTokenizer pretokenizer_for_gguf_pre(const std::string& name);

}  // namespace mx
