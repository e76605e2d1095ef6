#include "tokenizer/jinja_eval.h"

#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_strings.h"

namespace mx::jinja {
namespace {

[[noreturn]] void error_at(int line, const std::string& what) { fail_input("chat template line {}: {}", line, what); }

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;

  Value* lookup(const std::string& name) {
    for (Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { kNormal, kBreak, kContinue };

int64_t int_of(const Value& v) { return v.kind == Kind::kBool ? v.b : v.i; }
double num_of(const Value& v) { return v.kind == Kind::kFloat ? v.f : static_cast<double>(int_of(v)); }

class Evaluator {
 public:
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      Flow f = exec_one(*s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  Flow exec_one(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText: out += s.text; return Flow::kNormal;
      case StmtKind::kOutput: out += to_str(eval(*s.expr, scope)); return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (!cond || eval(*cond, scope).truthy()) return exec(body, scope, out);
        return Flow::kNormal;
      case StmtKind::kFor: return exec_for(s, scope, out);
      case StmtKind::kSet: exec_set(s, scope); return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string captured;
        exec(s.body, scope, captured);
        Value v = Value::string(captured);
        if (s.filter) v = apply_filter_chain(*s.filter, v, scope);
        scope->vars[s.targets[0]] = v;
        return Flow::kNormal;
      }
      case StmtKind::kMacro: scope->vars[s.targets[0]] = make_macro(s, scope); return Flow::kNormal;
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kFilterBlock: {
        std::string captured;
        exec(s.body, scope, captured);
        out += to_str(apply_filter_chain(*s.filter, Value::string(captured), scope));
        return Flow::kNormal;
      }
      case StmtKind::kScope: return exec(s.body, scope, out);
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    Value iterable = eval(*s.expr, scope);
    if (iterable.is_none()) error_at(s.line, "'NoneType' object is not iterable");
    List items = iterate(iterable, s.line);
    auto bind = [&](const ScopePtr& target, const Value& item) {
      if (s.targets.size() == 1) {
        target->vars[s.targets[0]] = item;
        return;
      }
      List parts = iterate(item, s.line);
      if (parts.size() != s.targets.size())
        error_at(s.line, fmt::format("cannot unpack {} values into {} loop variables", parts.size(), s.targets.size()));
      for (size_t k = 0; k < parts.size(); ++k) target->vars[s.targets[k]] = parts[k];
    };
    if (s.condition) {  // {% for x in xs if cond %}: filter first, loop.* counts what is left
      List kept;
      for (const Value& item : items) {
        ScopePtr probe = child_of(scope);
        bind(probe, item);
        if (eval(*s.condition, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, scope, out);  // a break/continue there has no loop to leave
      return Flow::kNormal;
    }
    int64_t n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      ScopePtr iteration = child_of(scope);  // jinja2: sets inside the body do not outlive the iteration
      bind(iteration, items[k]);
      Value loop = Value::make_dict();
      loop.set("index", Value::integer(k + 1));
      loop.set("index0", Value::integer(k));
      loop.set("revindex", Value::integer(n - k));
      loop.set("revindex0", Value::integer(n - k - 1));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k == n - 1));
      loop.set("length", Value::integer(n));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      loop.set("previtem", k > 0 ? items[k - 1] : Value::undefined("previtem"));
      loop.set("nextitem", k + 1 < n ? items[k + 1] : Value::undefined("nextitem"));
      loop.set("cycle", Value::function([k](CallArgs& a) {
        if (a.positional.empty()) error_at(a.line, "loop.cycle needs at least one argument");
        return a.positional[static_cast<size_t>(k) % a.positional.size()];
      }));
      loop.is_namespace = true;  // attribute access only; printed rarely
      iteration->vars["loop"] = loop;
      Flow f = exec(s.body, iteration, out);
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void exec_set(const Stmt& s, const ScopePtr& scope) {
    Value v = eval(*s.expr, scope);
    if (!s.attr.empty()) {
      Value* target = scope->lookup(s.targets[0]);
      if (!target || target->kind != Kind::kDict || !target->is_namespace)
        error_at(s.line, fmt::format("cannot assign attribute '{}' on '{}': not a namespace", s.attr, s.targets[0]));
      // A namespace holding itself would never be freed and prints forever.
      if (holds_dict(v, target->dict.get()))
        error_at(s.line, fmt::format("cannot assign '{}.{}': the value holds the namespace '{}' itself", s.targets[0],
                                     s.attr, s.targets[0]));
      target->set(s.attr, v);
      return;
    }
    if (s.targets.size() == 1) {
      scope->vars[s.targets[0]] = v;
      return;
    }
    List parts = iterate(v, s.line);
    if (parts.size() != s.targets.size())
      error_at(s.line, fmt::format("cannot unpack {} values into {} names", parts.size(), s.targets.size()));
    for (size_t k = 0; k < parts.size(); ++k) scope->vars[s.targets[k]] = parts[k];
  }

  Value make_macro(const Stmt& s, const ScopePtr& defined_in) {
    const Stmt* macro = &s;
    std::weak_ptr<Scope> weak = defined_in;  // the scope owns the macro: avoid a cycle
    return Value::function([this, macro, weak](CallArgs& a) {
      // A macro that calls itself without end would overflow the stack (a
      // crash of the server); Python's jinja2 stops it with RecursionError.
      if (macro_depth_ >= kMaxMacroDepth)
        error_at(a.line, fmt::format("macro '{}' nested more than {} calls deep (endless recursion?)", macro->targets[0], kMaxMacroDepth));
      ++macro_depth_;
      struct Leave {
        int& depth;
        ~Leave() { --depth; }
      } leave{macro_depth_};
      ScopePtr parent = weak.lock();
      ScopePtr call = child_of(parent);
      if (a.positional.size() > macro->params.size())
        error_at(a.line, fmt::format("macro '{}' takes {} arguments, got {}", macro->targets[0], macro->params.size(), a.positional.size()));
      for (size_t k = 0; k < macro->params.size(); ++k) {
        const auto& [pname, def] = macro->params[k];
        Value v = a.get(k, pname.c_str(), Value::undefined(pname));
        if (v.is_undefined() && def) v = eval(*def, call);
        call->vars[pname] = v;
      }
      for (const auto& [key, v] : a.keyword) {
        bool known = false;
        for (const auto& p : macro->params) known |= p.first == key;
        if (!known) error_at(a.line, fmt::format("macro '{}' has no parameter '{}'", macro->targets[0], key));
      }
      std::string out;
      exec(macro->body, call, out);
      Value r = Value::string(out);
      r.is_safe = true;
      return r;
    });
  }

  CallArgs eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs a;
    a.line = e.line;
    for (const ExprPtr& x : e.items) a.positional.push_back(eval(*x, scope));
    for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x, scope));
    return a;
  }

  Value apply_filter_chain(const Expr& f, const Value& input, const ScopePtr& scope) {
    Value operand = f.object ? apply_filter_chain(*f.object, input, scope) : input;
    CallArgs a = eval_args(f, scope);
    return apply_filter(f.name, operand, a);
  }

 public:
  Value eval(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.value;
      case ExprKind::kName: {
        if (Value* v = scope->lookup(e.name)) return *v;
        return global_value(e.name);
      }
      case ExprKind::kList: {
        List items;
        for (const ExprPtr& x : e.items) items.push_back(eval(*x, scope));
        return Value::make_list(std::move(items), e.is_tuple);
      }
      case ExprKind::kDict: {
        Value d = Value::make_dict();
        for (const auto& [k, v] : e.pairs) d.set(to_str(eval(*k, scope)), eval(*v, scope));
        return d;
      }
      case ExprKind::kAttr: return get_attribute(eval(*e.object, scope), e.name, e.line);
      case ExprKind::kSubscript: return get_item(eval(*e.object, scope), eval(*e.items[0], scope), e.line);
      case ExprKind::kSlice: return eval_slice(e, scope);
      case ExprKind::kCall: {
        Value callee = eval(*e.object, scope);
        if (callee.kind != Kind::kFunction) {
          std::string what = e.object->kind == ExprKind::kName ? e.object->name
                             : e.object->kind == ExprKind::kAttr ? e.object->name : "expression";
          if (callee.is_undefined()) error_at(e.line, fmt::format("'{}' is undefined (unknown function or method)", what));
          error_at(e.line, fmt::format("'{}' is not callable ({})", what, type_name(callee)));
        }
        CallArgs a = eval_args(e, scope);
        return (*callee.fn)(a);
      }
      case ExprKind::kFilter: {
        Value operand = eval(*e.object, scope);
        CallArgs a = eval_args(e, scope);
        return apply_filter(e.name, operand, a);
      }
      case ExprKind::kTest: {
        Value operand = eval(*e.object, scope);
        CallArgs a = eval_args(e, scope);
        return Value::boolean(apply_test(e.name, operand, a) != e.negated);
      }
      case ExprKind::kUnary: return eval_unary(e, scope);
      case ExprKind::kBinary: return eval_binary(e, scope);
      case ExprKind::kCond:
        if (eval(*e.object, scope).truthy()) return eval(*e.items[0], scope);
        return e.items[1] ? eval(*e.items[1], scope) : Value::undefined("else");
    }
    return Value::undefined();
  }

 private:
  Value eval_slice(const Expr& e, const ScopePtr& scope) {
    Value obj = eval(*e.object, scope);
    if (obj.is_undefined()) error_at(e.line, "cannot slice an undefined value");
    auto bound = [&](size_t k) -> std::optional<int64_t> {
      if (!e.items[k]) return std::nullopt;
      Value v = eval(*e.items[k], scope);
      if (v.is_none()) return std::nullopt;
      if (v.kind != Kind::kInt && v.kind != Kind::kBool) error_at(e.line, "slice indices must be integers");
      return int_of(v);
    };
    std::optional<int64_t> start = bound(0), stop = bound(1), step_opt = bound(2);
    int64_t step = step_opt.value_or(1);
    if (step == 0) error_at(e.line, "slice step cannot be zero");
    List src;
    std::vector<std::string> chars;
    bool is_str = obj.is_string();
    if (is_str) chars = code_points(obj.str());
    else if (obj.kind == Kind::kList) src = *obj.list;
    else error_at(e.line, fmt::format("'{}' object is not subscriptable", type_name(obj)));
    int64_t n = is_str ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(src.size());
    // Python's slice.indices().
    auto clamp = [&](std::optional<int64_t> v, int64_t def_pos, int64_t def_neg) {
      if (!v) return step > 0 ? def_pos : def_neg;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t b = clamp(start, 0, n - 1), en = clamp(stop, n, -1);
    List out;
    std::string sout;
    for (int64_t i = b; step > 0 ? i < en : i > en; i += step) {
      if (is_str) sout += chars[i];
      else out.push_back(src[i]);
    }
    if (is_str) return Value::string(sout);
    return Value::make_list(std::move(out), obj.is_tuple);
  }

  Value eval_unary(const Expr& e, const ScopePtr& scope) {
    Value v = eval(*e.object, scope);
    if (e.name == "not") return Value::boolean(!v.truthy());
    if (!v.is_number()) error_at(e.line, fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(v)));
    if (e.name == "+") return v.kind == Kind::kBool ? Value::integer(v.b) : v;
    return v.kind == Kind::kFloat ? Value::number(-v.f) : Value::integer(-int_of(v));
  }

  [[noreturn]] void operand_error(const Expr& e, const Value& a, const Value& b) {
    if (a.is_undefined() || b.is_undefined()) {
      const Value& u = a.is_undefined() ? a : b;
      error_at(e.line, fmt::format("'{}' is undefined", u.s && !u.s->empty() ? *u.s : "value"));
    }
    error_at(e.line, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", e.name, type_name(a), type_name(b)));
  }

  Value eval_binary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.name;
    if (op == "and" || op == "or") {
      Value l = eval(*e.object, scope);
      if (op == "and" ? !l.truthy() : l.truthy()) return l;
      return eval(*e.items[0], scope);
    }
    Value a = eval(*e.object, scope), b = eval(*e.items[0], scope);
    if (op == "~") {
      std::string joined = to_str(a) + to_str(b);
      check_string_size(double(joined.size()), e.line, "'~'");
      return Value::string(std::move(joined));
    }
    if (op == "==") return Value::boolean(equals(a, b));
    if (op == "!=") return Value::boolean(!equals(a, b));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      if (a.is_undefined() || b.is_undefined()) operand_error(e, a, b);
      int c = compare(a, b, e.line);
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "in" || op == "not in") {
      CallArgs args;
      args.line = e.line;
      args.positional.push_back(b);
      if (b.is_string() && !a.is_string())
        error_at(e.line, fmt::format("'in <string>' requires string as left operand, not {}", type_name(a)));
      bool found = b.is_none() ? (error_at(e.line, "argument of type 'NoneType' is not iterable"), false)
                               : apply_test("in", a, args);
      return Value::boolean(found != (op == "not in"));
    }
    if (op == "+") {
      if (a.is_number() && b.is_number()) return arith(a, b, op);
      if (a.is_string() && b.is_string()) {
        check_string_size(double(a.str().size()) + double(b.str().size()), e.line, "'+'");
        return Value::string(a.str() + b.str());
      }
      if (a.kind == Kind::kList && b.kind == Kind::kList) {
        List items = *a.list;
        items.insert(items.end(), b.list->begin(), b.list->end());
        return Value::make_list(std::move(items), a.is_tuple);
      }
      operand_error(e, a, b);
    }
    if (op == "*") {
      if (a.is_number() && b.is_number()) return arith(a, b, op);
      const Value& seq = a.is_number() ? b : a;
      const Value& count = a.is_number() ? a : b;
      if ((seq.is_string() || seq.kind == Kind::kList) && count.kind != Kind::kFloat && count.is_number()) {
        int64_t times = std::max<int64_t>(0, int_of(count));
        if (seq.is_string()) check_string_size(double(times) * double(seq.str().size()), e.line, "'*'");
        else check_list_size(double(times) * double(seq.list->size()), e.line, "'*'");
        if (seq.is_string()) {
          std::string out;
          for (int64_t k = 0; k < times; ++k) out += seq.str();
          return Value::string(out);
        }
        List items;
        for (int64_t k = 0; k < times; ++k) items.insert(items.end(), seq.list->begin(), seq.list->end());
        return Value::make_list(std::move(items));
      }
      operand_error(e, a, b);
    }
    if (!a.is_number() || !b.is_number()) operand_error(e, a, b);
    return arith(a, b, op, e.line);
  }

  Value arith(const Value& a, const Value& b, const std::string& op, int line = 0) {
    bool ints = a.kind != Kind::kFloat && b.kind != Kind::kFloat;
    if (op == "+") return ints ? Value::integer(int_of(a) + int_of(b)) : Value::number(num_of(a) + num_of(b));
    if (op == "-") return ints ? Value::integer(int_of(a) - int_of(b)) : Value::number(num_of(a) - num_of(b));
    if (op == "*") return ints ? Value::integer(int_of(a) * int_of(b)) : Value::number(num_of(a) * num_of(b));
    if (num_of(b) == 0 && (op == "/" || op == "//" || op == "%")) error_at(line, "division by zero");
    if (op == "/") return Value::number(num_of(a) / num_of(b));
    if (op == "//") {
      if (ints) {
        int64_t q = int_of(a) / int_of(b);
        if ((int_of(a) % int_of(b) != 0) && ((int_of(a) < 0) != (int_of(b) < 0))) --q;
        return Value::integer(q);
      }
      return Value::number(std::floor(num_of(a) / num_of(b)));
    }
    if (op == "%") {
      if (ints) {
        int64_t r = int_of(a) % int_of(b);
        if (r != 0 && ((r < 0) != (int_of(b) < 0))) r += int_of(b);
        return Value::integer(r);
      }
      double r = std::fmod(num_of(a), num_of(b));
      if (r != 0 && ((r < 0) != (num_of(b) < 0))) r += num_of(b);
      return Value::number(r);
    }
    if (op == "**") {
      if (ints && int_of(b) >= 0) {
        // Exact while it fits an int64 (Python's ints never overflow; past
        // that, the float result is the closest this interpreter has). |base|
        // <= 1 is settled directly: multiplying would take `power` steps.
        const int64_t base = int_of(a), power = int_of(b);
        if (base == 0) return Value::integer(power == 0 ? 1 : 0);
        if (base == 1) return Value::integer(1);
        if (base == -1) return Value::integer(power % 2 ? -1 : 1);
        int64_t r = 1;
        bool fits = true;
        for (int64_t k = 0; k < power && fits; ++k) fits = !__builtin_mul_overflow(r, base, &r);
        if (fits) return Value::integer(r);
      }
      return Value::number(std::pow(num_of(a), num_of(b)));
    }
    error_at(line, fmt::format("unknown operator '{}'", op));
  }

  static constexpr int kMaxMacroDepth = 100;
  int macro_depth_ = 0;  // macro calls in progress
};

}  // namespace

Template::Template(const std::string& source) : body_(parse_template(source)) {}

std::string Template::render(const Dict& globals) const {
  auto scope = std::make_shared<Scope>();
  for (const auto& [k, v] : globals) scope->vars[k] = v;
  Evaluator ev;
  std::string out;
  Flow f = ev.exec(body_, scope, out);
  (void)f;  // break/continue outside a loop: jinja2 rejects at parse time; we just stop
  return out;
}

}  // namespace mx::jinja
