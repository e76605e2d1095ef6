// Jinja lexer with the options Hugging Face renders chat templates with
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False), and
// jinja2's rules for whitespace control ({%- -%} {%+ +%}), comments and raw.
#pragma once
#include <string>
#include <vector>

namespace mx::jinja {

enum class TokenType { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInteger, kFloat, kOperator, kEof };

struct Token {
  TokenType type;
  std::string text;  // data, name, operator, unescaped string, number literal
  int line;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws InvalidArgument("line N: ...") for unterminated tags, strings, comments.
std::vector<Token> lex(const std::string& source, const LexOptions& options = {});

}  // namespace mx::jinja
