#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mx::jinja {
namespace {

// jinja2 turns \r\n and \r into \n in the whole source before lexing.
std::string normalize_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Python's \s / str.isspace for the code point at s[i]; returns its length or 0.
size_t space_len(const std::string& s, size_t i) {
  size_t n = utf8::valid_sequence_length(s, i);
  if (n == 0) return 0;
  return utf8::is_python_space(utf8::decode_at(s, i, n)) ? n : 0;
}

std::string rstrip_python(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    if (space_len(s, b) != end - b) break;
    end = b;
  }
  return s.substr(0, end);
}

size_t skip_spaces(const std::string& s, size_t i) {
  while (i < s.size())
    if (size_t n = space_len(s, i)) i += n;
    else break;
  return i;
}

int count_newlines(const std::string& s, size_t b, size_t e) {
  int n = 0;
  for (size_t i = b; i < e && i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(const std::string& source, const LexOptions& o) : src_(normalize_newlines(source)), opt_(o) {
    if (!opt_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t open = find_open(pos_);
      std::string data = src_.substr(pos_, (open == std::string::npos ? src_.size() : open) - pos_);
      if (open == std::string::npos) {
        emit_data(data);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      size_t after = open + 2;
      char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      if (sign == '-') {
        data = rstrip_python(data);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        size_t l_pos = data.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < data.size() && skip_spaces(data, l_pos) == data.size())
          data.resize(l_pos);
      }
      emit_data(data);
      line_ += count_newlines(src_, pos_, open);
      pos_ = after + (sign ? 1 : 0);
      if (kind == '#') {
        line_starting = lex_comment();
      } else if (kind == '%' && is_raw_begin()) {
        line_starting = lex_raw();
      } else {
        line_starting = lex_tag(kind == '%');
      }
    }
    tokens_.push_back(Token{TokenType::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void emit_data(const std::string& data) {
    if (!data.empty()) tokens_.push_back(Token{TokenType::kData, data, line_});
  }

  [[noreturn]] void error(const std::string& what) const { fail_input("chat template line {}: {}", line_, what); }

  // Consumes a tag end at pos_ if there is one ("-%}", "+%}", "%}"); applies
  // trim rules; returns whether the consumed text ended with a newline.
  bool try_end(const char* end, bool block, bool& ended) {
    size_t len = std::strlen(end);
    ended = false;
    char sign = src_[pos_] == '-' || src_[pos_] == '+' ? src_[pos_] : 0;
    size_t at = pos_ + (sign ? 1 : 0);
    if (src_.compare(at, len, end) != 0) return false;
    ended = true;
    size_t next = at + len;
    if (sign == '-') {
      next = skip_spaces(src_, next);
    } else if (sign == 0 && block && opt_.trim_blocks && next < src_.size() && src_[next] == '\n') {
      ++next;
    }
    line_ += count_newlines(src_, pos_, next);
    pos_ = next;
    return next > 0 && src_[next - 1] == '\n';
  }

  bool lex_comment() {
    int start_line = line_;
    while (pos_ < src_.size()) {
      size_t close = src_.find("#}", pos_);
      if (close == std::string::npos) break;
      // "-#}" / "+#}" / "#}" (trim applies like a block end)
      size_t sign_at = close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? close - 1 : close;
      line_ += count_newlines(src_, pos_, sign_at);
      pos_ = sign_at;
      bool ended;
      bool nl = try_end("#}", true, ended);
      if (ended) return nl;
      pos_ = close + 2;
    }
    line_ = start_line;
    error("missing end of comment tag");
  }

  bool is_raw_begin() const {
    size_t i = skip_spaces(src_, pos_);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_spaces(src_, i + 3);
    return src_.compare(i, 2, "%}") == 0 || src_.compare(i, 3, "-%}") == 0;
  }

  bool lex_raw() {
    size_t i = skip_spaces(src_, pos_) + 3;
    pos_ = skip_spaces(src_, i);
    bool ended;
    bool nl = try_end("%}", true, ended);
    // Find {% endraw %}.
    for (size_t open = src_.find("{%", pos_); open != std::string::npos; open = src_.find("{%", open + 2)) {
      size_t j = open + 2;
      char sign = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j] : 0;
      size_t k = skip_spaces(src_, j + (sign ? 1 : 0));
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k = skip_spaces(src_, k + 6);
      std::string data = src_.substr(pos_, open - pos_);
      if (sign == '-') data = rstrip_python(data);
      emit_data(data);
      line_ += count_newlines(src_, pos_, k);
      pos_ = k;
      nl = try_end("%}", true, ended);
      if (!ended) error("malformed endraw tag");
      return nl;
    }
    error("missing {% endraw %}");
    (void)nl;
  }

  bool lex_tag(bool block) {
    tokens_.push_back(Token{block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", line_});
    const char* end = block ? "%}" : "}}";
    while (true) {
      if (pos_ >= src_.size()) error(block ? "missing end of block tag '%}'" : "missing end of variable tag '}}'");
      bool ended;
      bool nl = block ? try_end(end, true, ended) : try_end_var(ended);
      if (ended) {
        tokens_.push_back(Token{block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", line_});
        return nl;
      }
      lex_expression_token();
    }
  }

  // Variable tags end with "-}}" or "}}" ("+}}" is not a thing).
  bool try_end_var(bool& ended) {
    ended = false;
    if (src_[pos_] == '+') return false;
    return try_end("}}", false, ended);
  }

  void lex_expression_token() {
    char c = src_[pos_];
    if (size_t n = space_len(src_, pos_)) {
      line_ += c == '\n';
      pos_ += n;
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number();
    if (is_name_start(c)) {
      size_t b = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back(Token{TokenType::kName, src_.substr(b, pos_ - b), line_});
      return;
    }
    if (c == '\'' || c == '"') return lex_string(c);
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]",
                                       "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
    for (const char* op : kOps) {
      if (src_.compare(pos_, std::strlen(op), op) == 0) {
        tokens_.push_back(Token{TokenType::kOperator, op, line_});
        pos_ += std::strlen(op);
        return;
      }
    }
    error(std::string("unexpected character '") + c + "'");
  }

  void lex_number() {
    size_t b = pos_;
    while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        pos_ = e;
        while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      }
    }
    std::string text;
    for (size_t i = b; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    tokens_.push_back(Token{is_float ? TokenType::kFloat : TokenType::kInteger, text, line_});
  }

  // Python string literal escapes (jinja2 decodes with "unicode-escape").
  void lex_string(char quote) {
    int start_line = line_;
    std::string out;
    ++pos_;
    while (true) {
      if (pos_ >= src_.size()) {
        line_ = start_line;
        error("unterminated string literal");
      }
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) continue;
      char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': ++line_; break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (pos_ + digits > src_.size()) error("truncated \\" + std::string(1, e) + " escape in string literal");
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            char h = src_[pos_ + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) error("bad \\" + std::string(1, e) + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          pos_ += digits;
          utf8::append_code_point(out, cp);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    tokens_.push_back(Token{TokenType::kString, out, start_line});
  }

  std::string src_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source, const LexOptions& options) { return Lexer(source, options).run(); }

}  // namespace mx::jinja
