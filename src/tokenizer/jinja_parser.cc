// Recursive-descent parser with jinja2's operator precedence:
//   cond-expr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary
// then postfix (.attr, [index], call) and filters/tests.
#include <set>

#include "core/error.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace mx::jinja {
namespace {

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_shared<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  const Token& cur() const { return t_[pos_]; }
  const Token& look(size_t k) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  Token next() { return t_[pos_ < t_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return cur().type == TokenType::kOperator && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::kName && cur().text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void error(const std::string& what, int line = -1) const {
    fail_input("chat template line {}: {}", line < 0 ? cur().line : line, what);
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kBlockEnd: return "end of block tag";
      case TokenType::kVarEnd: return "end of print tag";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error(fmt::format("expected '{}', found {}", op, describe(cur())));
  }
  std::string expect_identifier() {
    if (cur().type != TokenType::kName) error(fmt::format("expected a name, found {}", describe(cur())));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) error(fmt::format("expected end of block tag, found {}", describe(cur())));
    ++pos_;
  }

  // Parses statements until a block tag whose name is in `terminators`; leaves
  // the position after that name and returns it in `found`.
  Body parse_body(const std::set<std::string>& terminators, std::string& found) {
    Nest nest(*this, "blocks");
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == TokenType::kEof) {
        if (!terminators.empty()) {
          std::string closer = *terminators.begin();
          for (const auto& t : terminators)
            if (t.rfind("end", 0) == 0) closer = t;
          error(fmt::format("unexpected end of template, expected {{% {} %}}", closer));
        }
        found.clear();
        return body;
      }
      if (tok.type == TokenType::kData) {
        auto s = make_stmt(StmtKind::kText, tok.line);
        s->text = tok.text;
        body.push_back(s);
        ++pos_;
      } else if (tok.type == TokenType::kVarBegin) {
        ++pos_;
        auto s = make_stmt(StmtKind::kOutput, tok.line);
        s->expr = parse_tuple(true);
        if (cur().type != TokenType::kVarEnd) error(fmt::format("expected end of print tag, found {}", describe(cur())));
        ++pos_;
        body.push_back(s);
      } else if (tok.type == TokenType::kBlockBegin) {
        ++pos_;
        if (cur().type != TokenType::kName) error("expected a statement name after '{%'");
        std::string name = cur().text;
        if (terminators.count(name)) {
          ++pos_;
          found = name;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        error(fmt::format("unexpected {}", describe(tok)));
      }
    }
  }

  StmtPtr parse_statement() {
    int line = cur().line;
    std::string name = next().text;
    if (name == "if") return parse_if(line);
    if (name == "for") return parse_for(line);
    if (name == "set") return parse_set(line);
    if (name == "macro") return parse_macro(line);
    if (name == "break" || name == "continue") {
      expect_block_end();
      return make_stmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
    }
    if (name == "filter") return parse_filter_block(line);
    if (name == "generation") {  // transformers' AssistantTracker tag: renders its body
      expect_block_end();
      auto s = make_stmt(StmtKind::kScope, line);
      std::string end;
      s->body = parse_body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    static const std::set<std::string> kEnds = {"endif", "endfor", "endset", "endmacro", "endfilter", "elif", "else", "endgeneration"};
    if (kEnds.count(name)) error(fmt::format("unexpected '{}' tag (no open block it could close)", name), line);
    error(fmt::format("unsupported tag '{}'", name), line);
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(StmtKind::kIf, line);
    ExprPtr cond = parse_tuple(true);
    expect_block_end();
    while (true) {
      std::string end;
      Body body = parse_body({"elif", "else", "endif"}, end);
      s->branches.emplace_back(cond, std::move(body));
      if (end == "endif") break;
      if (end == "else") {
        expect_block_end();
        Body else_body = parse_body({"endif"}, end);
        s->branches.emplace_back(nullptr, std::move(else_body));
        break;
      }
      cond = parse_tuple(true);
      expect_block_end();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(StmtKind::kFor, line);
    bool paren = accept_op("(");
    s->targets.push_back(expect_identifier());
    while (accept_op(",")) {
      if (is_name("in") || is_op(")")) break;
      s->targets.push_back(expect_identifier());
    }
    if (paren) expect_op(")");
    if (!accept_name("in")) error(fmt::format("expected 'in' in for loop, found {}", describe(cur())));
    s->expr = parse_tuple(false);
    if (accept_name("if")) s->condition = parse_expression(true);
    if (is_name("recursive")) error("unsupported 'recursive' for loop");
    expect_block_end();
    std::string end;
    s->body = parse_body({"else", "endfor"}, end);
    if (end == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, end);
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(int line) {
    std::vector<std::string> names{expect_identifier()};
    std::string attr;
    if (accept_op(".")) {
      attr = expect_identifier();
    } else {
      while (accept_op(",")) names.push_back(expect_identifier());
    }
    if (accept_op("=")) {
      auto s = make_stmt(StmtKind::kSet, line);
      s->targets = names;
      s->attr = attr;
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (names.size() != 1 || !attr.empty()) error("a block set takes a single name", line);
    auto s = make_stmt(StmtKind::kSetBlock, line);
    s->targets = names;
    if (is_op("|")) s->filter = parse_filter_chain(nullptr);
    expect_block_end();
    std::string end;
    s->body = parse_body({"endset"}, end);
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(StmtKind::kMacro, line);
    s->targets.push_back(expect_identifier());
    expect_op("(");
    while (!accept_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string param = expect_identifier();
      ExprPtr def;
      if (accept_op("=")) def = parse_expression(true);
      s->params.emplace_back(param, def);
    }
    expect_block_end();
    std::string end;
    s->body = parse_body({"endmacro"}, end);
    if (cur().type == TokenType::kName) ++pos_;  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = make_stmt(StmtKind::kFilterBlock, line);
    s->filter = parse_filter_chain(nullptr, /*leading_pipe=*/false);
    expect_block_end();
    std::string end;
    s->body = parse_body({"endfilter"}, end);
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  // A comma-separated list becomes a tuple (as in {{ a, b }} and set x = a, b).
  ExprPtr parse_tuple(bool with_condexpr) {
    int line = cur().line;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make_expr(ExprKind::kList, line);
    t->is_tuple = true;
    t->items.push_back(first);
    while (accept_op(",")) {
      if (cur().type == TokenType::kBlockEnd || cur().type == TokenType::kVarEnd || is_op(")")) break;
      t->items.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      int line = next().line;
      auto c = make_expr(ExprKind::kCond, line);
      c->object = parse_or();
      c->items.push_back(e);
      c->items.push_back(accept_name("else") ? parse_condexpr() : nullptr);
      e = c;
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto b = make_expr(ExprKind::kBinary, line);
    b->name = op;
    b->object = std::move(l);
    b->items.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      int line = next().line;
      e = binary("or", e, parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      int line = next().line;
      e = binary("and", e, parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
    Nest nest(*this, "expression");
    if (is_name("not")) {
      int line = next().line;
      auto u = make_expr(ExprKind::kUnary, line);
      u->name = "not";
      u->object = parse_not();
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    ExprPtr chain;  // a < b < c == (a < b) and (b < c)
    ExprPtr left = e;
    while (true) {
      int line = cur().line;
      std::string op;
      if (cur().type == TokenType::kOperator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" || cur().text == "<=" ||
           cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++pos_;
        op = "in";
      } else if (is_name("not") && look(1).type == TokenType::kName && look(1).text == "in") {
        pos_ += 2;
        op = "not in";
      } else {
        break;
      }
      ExprPtr right = parse_math1();
      ExprPtr cmp = binary(op, left, right, line);
      chain = chain ? binary("and", chain, cmp, line) : cmp;
      left = right;
    }
    return chain ? chain : e;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      Token op = next();
      e = binary(op.text, e, parse_concat(), op.line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      e = binary("~", e, parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Token op = next();
      e = binary(op.text, e, parse_pow(), op.line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      int line = next().line;
      e = binary("**", e, parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this, "expression");
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      Token op = next();
      node = make_expr(ExprKind::kUnary, op.line);
      node->name = op.text;
      node->object = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(node);
    if (with_filter) node = parse_filter_expr(node);
    return node;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    int line = tok.line;
    switch (tok.type) {
      case TokenType::kName: {
        std::string n = next().text;
        auto lit = make_expr(ExprKind::kLiteral, line);
        if (n == "true" || n == "True") lit->value = Value::boolean(true);
        else if (n == "false" || n == "False") lit->value = Value::boolean(false);
        else if (n == "none" || n == "None") lit->value = Value::none();
        else {
          auto name = make_expr(ExprKind::kName, line);
          name->name = n;
          return name;
        }
        return lit;
      }
      case TokenType::kString: {
        std::string s = next().text;
        while (cur().type == TokenType::kString) s += next().text;  // adjacent literals concatenate
        auto lit = make_expr(ExprKind::kLiteral, line);
        lit->value = Value::string(std::move(s));
        return lit;
      }
      case TokenType::kInteger: {
        auto lit = make_expr(ExprKind::kLiteral, line);
        try {
          lit->value = Value::integer(std::stoll(next().text));
        } catch (const std::exception&) {
          error("integer literal out of range", line);
        }
        return lit;
      }
      case TokenType::kFloat: {
        auto lit = make_expr(ExprKind::kLiteral, line);
        try {
          lit->value = Value::number(std::stod(next().text));
        } catch (const std::exception&) {  // out_of_range: 1e999
          error("float literal out of range", line);
        }
        return lit;
      }
      case TokenType::kOperator:
        if (accept_op("(")) {
          if (accept_op(")")) {
            auto t = make_expr(ExprKind::kList, line);
            t->is_tuple = true;
            return t;
          }
          ExprPtr first = parse_expression(true);
          if (accept_op(")")) return first;
          auto t = make_expr(ExprKind::kList, line);
          t->is_tuple = true;
          t->items.push_back(first);
          while (accept_op(",")) {
            if (is_op(")")) break;
            t->items.push_back(parse_expression(true));
          }
          expect_op(")");
          return t;
        }
        if (accept_op("[")) {
          auto l = make_expr(ExprKind::kList, line);
          while (!accept_op("]")) {
            if (!l->items.empty()) expect_op(",");
            if (accept_op("]")) break;
            l->items.push_back(parse_expression(true));
          }
          return l;
        }
        if (accept_op("{")) {
          auto d = make_expr(ExprKind::kDict, line);
          while (!accept_op("}")) {
            if (!d->pairs.empty()) expect_op(",");
            if (accept_op("}")) break;
            ExprPtr k = parse_expression(true);
            expect_op(":");
            d->pairs.emplace_back(k, parse_expression(true));
          }
          return d;
        }
        break;
      default: break;
    }
    error(fmt::format("unexpected {} in expression", describe(tok)));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      int line = cur().line;
      if (accept_op(".")) {
        if (cur().type == TokenType::kInteger) {
          auto sub = make_expr(ExprKind::kSubscript, line);
          sub->object = node;
          auto lit = make_expr(ExprKind::kLiteral, line);
          try {
            lit->value = Value::integer(std::stoll(next().text));
          } catch (const std::exception&) {  // out_of_range: more digits than an int64 holds
            error("integer subscript out of range", line);
          }
          sub->items.push_back(lit);
          node = sub;
          continue;
        }
        auto a = make_expr(ExprKind::kAttr, line);
        a->object = node;
        a->name = expect_identifier();
        node = a;
      } else if (accept_op("[")) {
        node = parse_subscript(node, line);
      } else if (is_op("(")) {
        node = parse_call(node);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node, int line) {
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (!accept_op("]")) {
      if (accept_op(":")) {
        slice = true;
        if (++part > 2) error("too many ':' in slice");
        continue;
      }
      if (parts[part]) expect_op("]");
      parts[part] = parse_expression(true);
    }
    auto sub = make_expr(slice ? ExprKind::kSlice : ExprKind::kSubscript, line);
    sub->object = node;
    if (slice) {
      for (auto& p : parts) sub->items.push_back(p);
    } else {
      if (!parts[0]) error("empty subscript", line);
      sub->items.push_back(parts[0]);
    }
    return sub;
  }

  void parse_args(Expr& into) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!into.items.empty() || !into.kwargs.empty()) expect_op(",");
      if (accept_op(")")) break;
      if (is_op("*") || is_op("**")) error("unsupported '*' / '**' arguments");
      if (cur().type == TokenType::kName && look(1).type == TokenType::kOperator && look(1).text == "=") {
        std::string key = next().text;
        ++pos_;
        into.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!into.kwargs.empty()) error("positional argument after keyword argument");
        into.items.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make_expr(ExprKind::kCall, cur().line);
    c->object = callee;
    parse_args(*c);
    return c;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter_chain(node);
      } else if (is_name("is")) {
        node = parse_test(node);
      } else if (is_op("(")) {
        node = parse_call(node);
      } else {
        return node;
      }
    }
  }

  // node | f1(args) | f2 ...; with leading_pipe=false the first '|' is absent
  // ({% filter f %}).
  ExprPtr parse_filter_chain(ExprPtr node, bool leading_pipe = true) {
    bool first = true;
    while ((first && !leading_pipe) || accept_op("|")) {
      first = false;
      auto f = make_expr(ExprKind::kFilter, cur().line);
      f->object = node;
      f->name = expect_identifier();
      while (accept_op(".")) f->name += "." + expect_identifier();
      if (is_op("(")) parse_args(*f);
      node = f;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;  // "is"
    auto t = make_expr(ExprKind::kTest, line);
    t->object = node;
    t->negated = accept_name("not");
    t->name = expect_identifier();
    while (accept_op(".")) t->name += "." + expect_identifier();
    if (is_op("(")) {
      parse_args(*t);
    } else if ((cur().type == TokenType::kName || cur().type == TokenType::kString || cur().type == TokenType::kInteger ||
                cur().type == TokenType::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("cannot chain multiple tests with 'is'");
      t->items.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  // Each level of brackets, signs, `not` and blocks is a recursive call: a
  // template of thousands of '(' overflowed the stack (found by
  // fuzz_chat_template). Python's jinja2 stops such input with RecursionError.
  static constexpr int kMaxNesting = 100;
  struct Nest {
    Parser& parser;
    Nest(Parser& p, const char* what) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.error(fmt::format("{} nested more than {} levels deep", what, kMaxNesting));
    }
    ~Nest() { --parser.depth_; }
  };

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(lex(source)).parse_all(); }

}  // namespace mx::jinja
