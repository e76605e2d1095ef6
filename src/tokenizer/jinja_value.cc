#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mx::jinja {

Value Value::undefined(std::string name) {
  Value v;
  v.s = std::make_shared<std::string>(std::move(name));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::make_shared<std::string>(std::move(x));
  return v;
}
Value Value::make_list(List items, bool tuple) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<List>(std::move(items));
  v.is_tuple = tuple;
  return v;
}
Value Value::make_dict(Dict items) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return none();
    case T::boolean: return boolean(j.get<bool>());
    case T::number_integer: return integer(j.get<int64_t>());
    case T::number_unsigned: return integer(static_cast<int64_t>(j.get<uint64_t>()));
    case T::number_float: return number(j.get<double>());
    case T::string: return string(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return make_list(std::move(items));
    }
    case T::object: {
      Dict items;
      items.reserve(j.size());
      for (const auto& [k, e] : j.items()) items.emplace_back(k, from_json(e));
      return make_dict(std::move(items));
    }
    default: return none();
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s->empty();
    case Kind::kList: return !list->empty();
    case Kind::kDict: return !dict->empty();
    case Kind::kFunction: return true;
  }
  return false;
}

Value* Value::find(const std::string& key) const {
  if (kind != Kind::kDict) return nullptr;
  for (auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

void Value::set(const std::string& key, Value v) const {
  if (Value* existing = find(key)) {
    *existing = std::move(v);
    return;
  }
  dict->emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t i, const char* name, Value fallback) const {
  if (i < positional.size()) return positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  return fallback;
}

bool CallArgs::has(size_t i, const char* name) const {
  if (i < positional.size()) return true;
  for (const auto& [k, v] : keyword)
    if (k == name) return true;
  return false;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout rules for repr().
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string mantissa = sci.substr(0, e);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
  }
  if (exponent < 0) {
    out += "0." + std::string(-exponent - 1, '0') + digits;
  } else if (static_cast<int>(digits.size()) <= exponent + 1) {
    out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
  }
  return out;
}

namespace {

// A namespace can be made to hold itself (`{% set ns.n = ns %}`, or a list
// that holds it), so the recursive walks over values (repr / str, tojson, ==,
// comparisons) stop at this nesting depth with a template error instead of
// overflowing the stack. Real values (chat messages, tool schemas) nest a few
// levels.
constexpr int kMaxNesting = 512;

void check_nesting(int depth) {
  if (depth > kMaxNesting)
    fail_input("a value nested deeper than {} levels (a namespace, list or dict that contains itself?)",
               kMaxNesting);
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      ++i;
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
    } else {
      size_t n = utf8::valid_sequence_length(s, i);
      uint32_t cp = n ? utf8::decode_at(s, i, n) : 0xFFFD;
      i += n ? n : 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
    }
  }
  out += '"';
}

void json_write(std::string& out, const Value& v, const JsonStyle& st, int depth, int line) {
  check_nesting(depth);
  auto newline = [&](int d) {
    if (st.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(st.indent) * d, ' ');
  };
  const std::string item_sep = st.item_sep ? *st.item_sep : (st.indent < 0 ? ", " : ",");
  const std::string key_sep = st.key_sep ? *st.key_sep : ": ";
  switch (v.kind) {
    case Kind::kUndefined: fail_input("line {}: tojson: value is undefined", line);
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.b ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.i); return;
    case Kind::kFloat:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(v.f);
      return;
    case Kind::kString: json_string(out, v.str(), st.ensure_ascii); return;
    case Kind::kList: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        json_write(out, (*v.list)[k], st, depth + 1, line);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Kind::kDict: {
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (st.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        json_string(out, items[k]->first, st.ensure_ascii);
        out += key_sep;
        json_write(out, items[k]->second, st, depth + 1, line);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Kind::kFunction: fail_input("line {}: tojson: a function is not JSON serializable", line);
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style, int line) {
  std::string out;
  json_write(out, v, style, 0, line);
  return out;
}

namespace {

std::string repr_at(const Value& v, int depth) {
  check_nesting(depth);
  switch (v.kind) {
    case Kind::kString: return repr_string(v.str());
    case Kind::kList: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr_at((*v.list)[k], depth + 1);
      }
      if (v.is_tuple && v.list->size() == 1) out += ",";
      return out + (v.is_tuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, e] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + repr_at(e, depth + 1);
      }
      return out + (v.is_namespace ? "}>" : "}");
    }
    default: return to_str(v);
  }
}

}  // namespace

std::string repr(const Value& v) { return repr_at(v, 0); }

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.b ? "True" : "False";
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return python_float_repr(v.f);
    case Kind::kString: return v.str();
    case Kind::kFunction: return "<function>";
    default: return repr(v);
  }
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.is_tuple ? "tuple" : "list";
    case Kind::kDict: return v.is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

namespace {
double as_double(const Value& v) {
  return v.kind == Kind::kFloat ? v.f : static_cast<double>(v.kind == Kind::kBool ? v.b : v.i);
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind != Kind::kFloat && b.kind != Kind::kFloat) return as_double(a) == as_double(b) && (a.kind == Kind::kBool ? a.b : a.i) == (b.kind == Kind::kBool ? b.b : b.i);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals_at((*a.list)[k], (*b.list)[k], depth + 1)) return false;
      return true;
    }
    case Kind::kDict: {
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        Value* other = b.find(k);
        if (!other || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::kFunction: return a.fn == b.fn;
    default: return false;
  }
}

int compare_at(const Value& a, const Value& b, int line, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    double x = as_double(a), y = as_double(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : (a.str() == b.str() ? 0 : 1);
  if (a.kind == Kind::kList && b.kind == Kind::kList) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k)
      if (int c = compare_at((*a.list)[k], (*b.list)[k], line, depth + 1)) return c;
    return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
  }
  fail_input("line {}: cannot compare {} with {}", line, type_name(a), type_name(b));
}

}  // namespace

bool holds_dict(const Value& v, const Dict* target) {
  std::vector<const Value*> todo{&v};
  std::unordered_set<const void*> seen;  // containers shared by several parents are walked once
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    if (x->kind == Kind::kList && seen.insert(x->list.get()).second) {
      for (const Value& e : *x->list) todo.push_back(&e);
    } else if (x->kind == Kind::kDict) {
      if (x->dict.get() == target) return true;
      if (seen.insert(x->dict.get()).second)
        for (const auto& [k, e] : *x->dict) todo.push_back(&e);
    }
  }
  return false;
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

int compare(const Value& a, const Value& b, int line) { return compare_at(a, b, line, 0); }

size_t code_point_length(const std::string& s) { return utf8::count_code_points(s); }

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

void check_string_size(double bytes, int line, const char* what) {
  if (bytes > double(kMaxStringBytes))
    fail_input("chat template line {}: {} would make a string of {:.0f} bytes (the limit is {} MiB)", line, what, bytes,
               kMaxStringBytes >> 20);
}

void check_list_size(double items, int line, const char* what) {
  if (items > double(kMaxListItems))
    fail_input("chat template line {}: {} would make a list of {:.0f} items (the limit is {})", line, what, items,
               kMaxListItems);
}

}  // namespace mx::jinja
