#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>

#include "core/error.h"
#include "tokenizer/jinja_strings.h"

namespace mx::jinja {
namespace {

[[noreturn]] void type_error(int line, const std::string& what) { fail_input("chat template line {}: {}", line, what); }

// replace() output size before building it: an empty `old` matches between
// every character (Python semantics), else at each occurrence.
void check_replace_size(const std::string& s, const std::string& old_s, const std::string& new_s, long count, int line) {
  double matches = old_s.empty() ? double(s.size()) + 1 : double(pystr::count(s, old_s));
  if (count >= 0) matches = std::min(matches, double(count));
  check_string_size(double(s.size()) + matches * (double(new_s.size()) - double(old_s.size())), line, "replace");
}

std::optional<std::string> opt_str(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  return to_str(v);
}

int64_t as_int(const Value& v, int line, const char* what) {
  if (v.kind == Kind::kInt) return v.i;
  if (v.kind == Kind::kBool) return v.b;
  type_error(line, fmt::format("{} must be an integer, got {}", what, type_name(v)));
}

double as_double(const Value& v) {
  return v.kind == Kind::kFloat ? v.f : static_cast<double>(v.kind == Kind::kBool ? v.b : v.i);
}

// Attribute path "a.b" as used by map/selectattr/sort(attribute=...).
Value attribute_path(const Value& v, const std::string& path, int line) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (cur.is_undefined()) return cur;
    // More digits than an int64 holds: past any list's end, as Python's int would be.
    const bool fits = part.size() < 19;
    cur = numeric && cur.kind == Kind::kList ? get_item(cur, Value::integer(fits ? std::stoll(part) : INT64_MAX), line)
                                              : get_item(cur, Value::string(part), line);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

// Python's str/int/float ordering for sort/min/max; strings case-folded unless asked.
bool sort_less(const Value& a, const Value& b, bool case_sensitive, int line) {
  if (!case_sensitive && a.is_string() && b.is_string()) return pystr::lower(a.str()) < pystr::lower(b.str());
  return compare(a, b, line) < 0;
}

Value key_of(const Value& v, const Value& attribute, int line) {
  return attribute.is_undefined() || attribute.is_none() ? v : attribute_path(v, to_str(attribute), line);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Python's int(str): optional sign, digits, surrounding whitespace, '_' between digits.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = pystr::strip(text, std::nullopt, pystr::Side::kBoth);
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  if (digits.empty()) return std::nullopt;
  size_t used = 0;
  try {
    long long v = std::stoll(digits, &used, base);
    if (used != digits.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> parse_float(const std::string& text) {
  std::string s = pystr::strip(text, std::nullopt, pystr::Side::kBoth);
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  try {
    double v = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Python's round(x, n): round half to even.
double python_round(double x, int64_t digits) {
  double scale = std::pow(10.0, static_cast<double>(digits));
  double y = x * scale;
  double r = std::nearbyint(y);  // default rounding mode: to nearest, ties to even
  return r / scale;
}

Value filter_tojson(const Value& v, CallArgs& a) {
  // transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  JsonStyle st;
  st.ensure_ascii = a.get(0, "ensure_ascii", Value::boolean(false)).truthy();
  Value indent = a.get(1, "indent", Value::none());
  if (!indent.is_none()) st.indent = static_cast<int>(as_int(indent, a.line, "tojson indent"));
  Value seps = a.get(2, "separators", Value::none());
  if (!seps.is_none()) {
    if (seps.kind != Kind::kList || seps.list->size() != 2)
      type_error(a.line, "tojson separators must be a pair (item_separator, key_separator)");
    st.item_sep = to_str((*seps.list)[0]);
    st.key_sep = to_str((*seps.list)[1]);
  }
  st.sort_keys = a.get(3, "sort_keys", Value::boolean(false)).truthy();
  return Value::string(to_json(v, st, a.line));
}

Value filter_indent(const Value& v, CallArgs& a) {
  Value width = a.get(0, "width", Value::integer(4));
  std::string ind = width.is_string() ? width.str() : std::string(static_cast<size_t>(as_int(width, a.line, "indent width")), ' ');
  bool first = a.get(1, "first", Value::boolean(false)).truthy();
  bool blank = a.get(2, "blank", Value::boolean(false)).truthy();
  std::vector<std::string> lines = pystr::splitlines(to_str(v) + "\n");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
  }
  return Value::string(first ? ind + rv : rv);
}

// select/reject/selectattr/rejectattr: args are (test name, test args...).
Value filter_select(const Value& v, CallArgs& a, bool by_attr, bool keep_if) {
  size_t k = 0;
  std::string attr;
  if (by_attr) attr = to_str(a.get(k++, "attribute"));
  std::optional<std::string> test;
  if (k < a.positional.size()) test = to_str(a.positional[k++]);
  CallArgs test_args;
  test_args.line = a.line;
  for (; k < a.positional.size(); ++k) test_args.positional.push_back(a.positional[k]);
  List out;
  for (const Value& item : iterate(v, a.line)) {
    Value subject = by_attr ? attribute_path(item, attr, a.line) : item;
    bool ok = test ? apply_test(*test, subject, test_args) : subject.truthy();
    if (ok == keep_if) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value filter_map(const Value& v, CallArgs& a) {
  List out;
  if (a.has(99, "attribute")) {
    std::string attr = to_str(a.get(99, "attribute"));
    Value def = a.get(99, "default");
    for (const Value& item : iterate(v, a.line)) {
      Value x = attribute_path(item, attr, a.line);
      out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
    }
    return Value::make_list(std::move(out));
  }
  if (a.positional.empty()) type_error(a.line, "map needs a filter name or attribute=");
  std::string name = to_str(a.positional[0]);
  CallArgs rest;
  rest.line = a.line;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : iterate(v, a.line)) out.push_back(apply_filter(name, item, rest));
  return Value::make_list(std::move(out));
}

Value filter_sort(const Value& v, CallArgs& a, bool dictsort) {
  bool reverse = a.get(dictsort ? 2 : 0, "reverse", Value::boolean(false)).truthy();
  bool case_sensitive = a.get(dictsort ? 0 : 1, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = dictsort ? Value::undefined() : a.get(2, "attribute");
  List items;
  if (dictsort) {
    if (v.kind != Kind::kDict) type_error(a.line, "dictsort expects a dict");
    bool by_value = to_str(a.get(1, "by", Value::string("key"))) == "value";
    for (const auto& [k, x] : *v.dict) items.push_back(Value::make_list({Value::string(k), x}, true));
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      return sort_less((*p.list)[by_value], (*q.list)[by_value], case_sensitive, a.line);
    });
  } else {
    items = iterate(v, a.line);
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
      return sort_less(key_of(p, attribute, a.line), key_of(q, attribute, a.line), case_sensitive, a.line);
    });
  }
  if (reverse) std::reverse(items.begin(), items.end());
  return Value::make_list(std::move(items));
}

Value filter_minmax(const Value& v, CallArgs& a, bool want_max) {
  bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = a.get(1, "attribute");
  List items = iterate(v, a.line);
  if (items.empty()) return Value::undefined("no items");
  Value best = items[0];
  for (size_t k = 1; k < items.size(); ++k) {
    bool better = want_max ? sort_less(key_of(best, attribute, a.line), key_of(items[k], attribute, a.line), case_sensitive, a.line)
                           : sort_less(key_of(items[k], attribute, a.line), key_of(best, attribute, a.line), case_sensitive, a.line);
    if (better) best = items[k];
  }
  return best;
}

Value filter_unique(const Value& v, CallArgs& a) {
  bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = a.get(1, "attribute");
  List out, seen;
  for (const Value& item : iterate(v, a.line)) {
    Value key = key_of(item, attribute, a.line);
    if (!case_sensitive && key.is_string()) key = Value::string(pystr::lower(key.str()));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value string_method(const Value& self, const std::string& name, CallArgs& a) {
  const std::string& s = self.str();
  auto str_arg = [&](size_t i, const char* n) { return opt_str(a.get(i, n, Value::none())); };
  if (name == "startswith" || name == "endswith") {
    Value p = a.get(0, "prefix");
    List options = p.kind == Kind::kList ? *p.list : List{p};
    for (const Value& o : options) {
      std::string x = to_str(o);
      bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0 && s.size() >= x.size()
                                      : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "strip") return Value::string(pystr::strip(s, str_arg(0, "chars"), pystr::Side::kBoth));
  if (name == "lstrip") return Value::string(pystr::strip(s, str_arg(0, "chars"), pystr::Side::kLeft));
  if (name == "rstrip") return Value::string(pystr::strip(s, str_arg(0, "chars"), pystr::Side::kRight));
  if (name == "split" || name == "rsplit") {
    long maxsplit = static_cast<long>(as_int(a.get(1, "maxsplit", Value::integer(-1)), a.line, "maxsplit"));
    if (name == "rsplit" && maxsplit >= 0) type_error(a.line, "str.rsplit with maxsplit is not supported");
    const std::optional<std::string> sep = str_arg(0, "sep");
    // Python: ValueError. Splitting on "" never advanced and filled memory (fuzz_chat_template).
    if (sep && sep->empty()) type_error(a.line, fmt::format("str.{}: empty separator", name));
    List out;
    for (auto& part : pystr::split(s, sep, maxsplit)) out.push_back(Value::string(part));
    return Value::make_list(std::move(out));
  }
  if (name == "splitlines") {
    List out;
    for (auto& part : pystr::splitlines(s)) out.push_back(Value::string(part));
    return Value::make_list(std::move(out));
  }
  if (name == "replace") {
    long count = static_cast<long>(as_int(a.get(2, "count", Value::integer(-1)), a.line, "count"));
    const std::string old_s = to_str(a.get(0, "old")), new_s = to_str(a.get(1, "new"));
    check_replace_size(s, old_s, new_s, count, a.line);
    return Value::string(pystr::replace(s, old_s, new_s, count));
  }
  if (name == "upper") return Value::string(pystr::upper(s));
  if (name == "lower") return Value::string(pystr::lower(s));
  if (name == "title") return Value::string(pystr::title(s));
  if (name == "capitalize") return Value::string(pystr::capitalize(s));
  if (name == "find") return Value::integer(pystr::find(s, to_str(a.get(0, "sub"))));
  if (name == "count") return Value::integer(pystr::count(s, to_str(a.get(0, "sub"))));
  if (name == "join") {
    std::string out;
    List items = iterate(a.get(0, "iterable"), a.line);
    double total = items.empty() ? 0 : double(s.size()) * double(items.size() - 1);
    for (const Value& item : items) total += item.is_string() ? double(item.str().size()) : 0;
    check_string_size(total, a.line, "str.join");
    for (size_t k = 0; k < items.size(); ++k) {
      if (!items[k].is_string()) type_error(a.line, fmt::format("str.join: item {} is {}, not str", k, type_name(items[k])));
      out += (k ? s : "") + items[k].str();
    }
    return Value::string(out);
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    if (s.empty()) return Value::boolean(false);
    for (unsigned char c : s) {
      bool ok = name == "isdigit" ? std::isdigit(c) : name == "isspace" ? std::isspace(c) : name == "isalpha" ? std::isalpha(c) : std::isalnum(c);
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  if (name == "format") {
    // '{}' / '{0}' placeholders with positional arguments.
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') out += '{', ++i;
      else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') out += '}', ++i;
      else if (s[i] == '{') {
        size_t close = s.find('}', i);
        if (close == std::string::npos) type_error(a.line, "str.format: unmatched '{'");
        std::string field = s.substr(i + 1, close - i - 1);
        const bool numeric = !field.empty() && field.size() < 10 && std::all_of(field.begin(), field.end(), ::isdigit);
        if (!field.empty() && !numeric) type_error(a.line, "str.format: only positional fields ({} or {0}) are supported");
        size_t idx = field.empty() ? next++ : static_cast<size_t>(std::stoul(field));
        if (idx >= a.positional.size()) type_error(a.line, "str.format: not enough arguments");
        out += to_str(a.positional[idx]);
        i = close;
      } else {
        out += s[i];
      }
    }
    return Value::string(out);
  }
  type_error(a.line, fmt::format("unsupported str method '{}'", name));
}

const char* const kMutatingMethods[] = {"append", "pop", "extend", "insert", "remove", "reverse", "sort", "clear",
                                        "update", "setdefault", "popitem", "add", "discard"};

}  // namespace

List iterate(const Value& v, int line) {
  switch (v.kind) {
    case Kind::kUndefined: return {};
    case Kind::kList: return *v.list;
    case Kind::kDict: {
      List keys;
      for (const auto& [k, x] : *v.dict) keys.push_back(Value::string(k));
      return keys;
    }
    case Kind::kString: {
      List chars;
      for (auto& c : code_points(v.str())) chars.push_back(Value::string(c));
      return chars;
    }
    default: type_error(line, fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

int64_t length_of(const Value& v, int line) {
  switch (v.kind) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(code_point_length(v.str()));
    case Kind::kList: return static_cast<int64_t>(v.list->size());
    case Kind::kDict: return static_cast<int64_t>(v.dict->size());
    default: type_error(line, fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

Value get_item(const Value& obj, const Value& key, int line) {
  switch (obj.kind) {
    case Kind::kUndefined:
      type_error(line, fmt::format("'{}' is undefined", obj.s && !obj.s->empty() ? *obj.s : "value"));
    case Kind::kDict: {
      std::string k = key.is_string() ? key.str() : to_str(key);
      if (Value* v = obj.find(k)) return *v;
      if (key.is_string()) {
        // jinja falls back to the attribute (e.g. d['items'] is the method).
        Value attr = get_attribute(obj, k, line);
        if (!attr.is_undefined()) return attr;
      }
      return Value::undefined(k);
    }
    case Kind::kList:
    case Kind::kString: {
      if (key.kind != Kind::kInt && key.kind != Kind::kBool) {
        if (key.is_string()) return get_attribute(obj, key.str(), line);
        type_error(line, fmt::format("{} indices must be integers, not {}", type_name(obj), type_name(key)));
      }
      int64_t n = length_of(obj, line);
      int64_t i = key.kind == Kind::kBool ? key.b : key.i;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index");
      if (obj.kind == Kind::kList) return (*obj.list)[i];
      return Value::string(code_points(obj.str())[i]);
    }
    default: return Value::undefined("item");
  }
}

Value get_attribute(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined())
    type_error(line, fmt::format("'{}' is undefined", obj.s && !obj.s->empty() ? *obj.s : "value"));
  if (obj.kind == Kind::kDict && obj.is_namespace) {
    if (Value* v = obj.find(name)) return *v;
    return Value::undefined(name);
  }
  for (const char* m : kMutatingMethods) {
    if (name == m && (obj.kind == Kind::kList || (obj.kind == Kind::kDict && !obj.is_namespace))) {
      // transformers renders in jinja2's ImmutableSandboxedEnvironment.
      return Value::function([name, t = std::string(type_name(obj)), line](CallArgs&) -> Value {
        fail_input("chat template line {}: access to attribute '{}' of '{}' object is unsafe "
                   "(templates may not modify lists or dicts)", line, name, t);
      });
    }
  }
  if (obj.kind == Kind::kDict) {
    if (name == "get") {
      return Value::function([obj](CallArgs& a) {
        Value* v = obj.find(to_str(a.get(0, "key")));
        return v ? *v : a.get(1, "default", Value::none());
      });
    }
    if (name == "items" || name == "keys" || name == "values") {
      return Value::function([obj, name](CallArgs&) {
        List out;
        for (const auto& [k, v] : *obj.dict) {
          if (name == "items") out.push_back(Value::make_list({Value::string(k), v}, true));
          else out.push_back(name == "keys" ? Value::string(k) : v);
        }
        return Value::make_list(std::move(out));
      });
    }
    if (Value* v = obj.find(name)) return *v;
    return Value::undefined(name);
  }
  if (obj.kind == Kind::kString) {
    static const char* const kMethods[] = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit",
                                           "splitlines", "replace", "upper", "lower", "title", "capitalize", "find",
                                           "count", "join", "isdigit", "isspace", "isalpha", "isalnum", "format"};
    for (const char* m : kMethods)
      if (name == m) return Value::function([obj, name](CallArgs& a) { return string_method(obj, name, a); });
    return Value::undefined(name);
  }
  if (obj.kind == Kind::kList) {
    if (name == "index" || name == "count") {
      return Value::function([obj, name](CallArgs& a) {
        Value x = a.get(0, "value");
        int64_t n = 0;
        for (size_t k = 0; k < obj.list->size(); ++k) {
          if (!equals((*obj.list)[k], x)) continue;
          if (name == "index") return Value::integer(static_cast<int64_t>(k));
          ++n;
        }
        if (name == "index") type_error(a.line, "list.index(x): x not in list");
        return Value::integer(n);
      });
    }
    return Value::undefined(name);
  }
  return Value::undefined(name);
}

Value apply_filter(const std::string& name, const Value& v, CallArgs& a) {
  int line = a.line;
  if (name == "tojson") return filter_tojson(v, a);
  if (name == "default" || name == "d") {
    bool boolean = a.get(1, "boolean", Value::boolean(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value::string(""));
    return v;
  }
  if (name == "length" || name == "count") return Value::integer(length_of(v, line));
  if (name == "string") return v.is_string() ? v : Value::string(to_str(v));
  if (name == "trim") return Value::string(pystr::strip(to_str(v), opt_str(a.get(0, "chars", Value::none())), pystr::Side::kBoth));
  if (name == "upper") return Value::string(pystr::upper(to_str(v)));
  if (name == "lower") return Value::string(pystr::lower(to_str(v)));
  if (name == "capitalize") return Value::string(pystr::capitalize(to_str(v)));
  if (name == "title") return Value::string(pystr::title(to_str(v)));
  if (name == "replace") {
    long count = a.has(2, "count") && !a.get(2, "count").is_none()
                     ? static_cast<long>(as_int(a.get(2, "count"), line, "count")) : -1;
    const std::string s = to_str(v), old_s = to_str(a.get(0, "old")), new_s = to_str(a.get(1, "new"));
    check_replace_size(s, old_s, new_s, count, line);
    return Value::string(pystr::replace(s, old_s, new_s, count));
  }
  if (name == "first") {
    List items = iterate(v, line);
    return items.empty() ? Value::undefined("first") : items.front();
  }
  if (name == "last") {
    List items = iterate(v, line);
    return items.empty() ? Value::undefined("last") : items.back();
  }
  if (name == "join") {
    std::string sep = to_str(a.get(0, "d", Value::string("")));
    Value attribute = a.get(1, "attribute");
    std::string out;
    List items = iterate(v, line);
    for (size_t k = 0; k < items.size(); ++k) {
      out += (k ? sep : "") + to_str(key_of(items[k], attribute, line));
      check_string_size(double(out.size()), line, "join");
    }
    return Value::string(out);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (v.kind != Kind::kDict) type_error(line, fmt::format("items filter expects a mapping, got {}", type_name(v)));
    List out;
    for (const auto& [k, x] : *v.dict) out.push_back(Value::make_list({Value::string(k), x}, true));
    return Value::make_list(std::move(out));
  }
  if (name == "list") return Value::make_list(iterate(v, line));
  if (name == "int") {
    Value def = a.get(0, "default", Value::integer(0));
    int base = static_cast<int>(as_int(a.get(1, "base", Value::integer(10)), line, "base"));
    if (v.kind == Kind::kInt) return v;
    if (v.kind == Kind::kBool) return Value::integer(v.b);
    if (v.kind == Kind::kFloat) return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(v.f)) : def;
    if (v.is_string()) {
      if (auto i = parse_int(v.str(), base)) return Value::integer(*i);
      if (auto f = parse_float(v.str())) return Value::integer(static_cast<int64_t>(*f));
    }
    return def;
  }
  if (name == "float") {
    Value def = a.get(0, "default", Value::number(0.0));
    if (v.is_number()) return Value::number(as_double(v));
    if (v.is_string())
      if (auto f = parse_float(v.str())) return Value::number(*f);
    return def;
  }
  if (name == "abs") {
    if (v.kind == Kind::kFloat) return Value::number(std::fabs(v.f));
    if (v.is_number()) return Value::integer(std::llabs(as_int(v, line, "abs")));
    type_error(line, fmt::format("bad operand type for abs(): '{}'", type_name(v)));
  }
  if (name == "round") {
    int64_t precision = as_int(a.get(0, "precision", Value::integer(0)), line, "precision");
    std::string method = to_str(a.get(1, "method", Value::string("common")));
    if (!v.is_number()) type_error(line, "round expects a number");
    double x = as_double(v), scale = std::pow(10.0, static_cast<double>(precision));
    if (method == "common") return Value::number(python_round(x, precision));
    if (method == "floor") return Value::number(std::floor(x * scale) / scale);
    if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
    type_error(line, "round method must be 'common', 'ceil' or 'floor'");
  }
  if (name == "sum") {
    Value attribute = a.get(0, "attribute");
    Value total = a.get(1, "start", Value::integer(0));
    for (const Value& item : iterate(v, line)) {
      Value x = key_of(item, attribute, line);
      if (!x.is_number() || !total.is_number()) type_error(line, "sum expects numbers");
      total = total.kind == Kind::kFloat || x.kind == Kind::kFloat ? Value::number(as_double(total) + as_double(x))
                                                                  : Value::integer(as_int(total, line, "sum") + as_int(x, line, "sum"));
    }
    return total;
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = code_points(v.str());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::string(out);
    }
    List items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "sort") return filter_sort(v, a, false);
  if (name == "dictsort") return filter_sort(v, a, true);
  if (name == "unique") return filter_unique(v, a);
  if (name == "min") return filter_minmax(v, a, false);
  if (name == "max") return filter_minmax(v, a, true);
  if (name == "map") return filter_map(v, a);
  if (name == "select") return filter_select(v, a, false, true);
  if (name == "reject") return filter_select(v, a, false, false);
  if (name == "selectattr") return filter_select(v, a, true, true);
  if (name == "rejectattr") return filter_select(v, a, true, false);
  if (name == "attr") return get_attribute(v, to_str(a.get(0, "name")), line);
  if (name == "indent") return filter_indent(v, a);
  if (name == "safe") {
    Value out = v.is_string() ? v : Value::string(to_str(v));
    out.is_safe = true;
    return out;
  }
  if (name == "escape" || name == "e") {
    if (v.is_safe) return v;
    Value out = Value::string(html_escape(to_str(v)));
    out.is_safe = true;
    return out;
  }
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(pystr::split(to_str(v), std::nullopt, -1).size()));
  if (name == "batch") {
    int64_t size = as_int(a.get(0, "linecount"), line, "batch size");
    if (size <= 0) type_error(line, "batch size must be positive");
    Value fill = a.get(1, "fill_with", Value::none());
    List out, cur;
    for (const Value& item : iterate(v, line)) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == size) out.push_back(Value::make_list(std::move(cur))), cur = {};
    }
    if (!cur.empty()) {
      if (a.has(1, "fill_with"))
        while (static_cast<int64_t>(cur.size()) < size) cur.push_back(fill);
      out.push_back(Value::make_list(std::move(cur)));
    }
    return Value::make_list(std::move(out));
  }
  type_error(line, fmt::format("unknown filter '{}'", name));
}

bool apply_test(const std::string& name, const Value& v, CallArgs& a) {
  int line = a.line;
  Value arg = a.get(0, "other");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == Kind::kBool;
  if (name == "true") return v.kind == Kind::kBool && v.b;
  if (name == "false") return v.kind == Kind::kBool && !v.b;
  if (name == "integer") return v.kind == Kind::kInt;
  if (name == "float") return v.kind == Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.kind == Kind::kDict && !v.is_namespace;
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.kind == Kind::kList || v.kind == Kind::kDict;
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.kind == Kind::kList || (v.kind == Kind::kDict && !v.is_namespace);
  if (name == "callable") return v.kind == Kind::kFunction;
  if (name == "escaped") return v.is_safe;
  if (name == "lower") return to_str(v) == pystr::lower(to_str(v)) && to_str(v) != pystr::upper(to_str(v));
  if (name == "upper") return to_str(v) == pystr::upper(to_str(v)) && to_str(v) != pystr::lower(to_str(v));
  if (name == "even" || name == "odd") {
    int64_t i = as_int(v, line, "even/odd test value");
    return ((i % 2 + 2) % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    int64_t d = as_int(arg, line, "divisibleby argument");
    if (d == 0) type_error(line, "divisibleby 0");
    return as_int(v, line, "divisibleby value") % d == 0;
  }
  if (name == "sameas") {
    if (v.kind != arg.kind) return false;
    switch (v.kind) {
      case Kind::kNone:
      case Kind::kUndefined: return true;
      case Kind::kBool: return v.b == arg.b;
      case Kind::kList: return v.list == arg.list;
      case Kind::kDict: return v.dict == arg.dict;
      default: return equals(v, arg);
    }
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg);
  if (name == "ne" || name == "!=") return !equals(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg, line) < 0;
  if (name == "le" || name == "<=") return compare(v, arg, line) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg, line) > 0;
  if (name == "ge" || name == ">=") return compare(v, arg, line) >= 0;
  if (name == "in") {
    if (arg.is_string()) return v.is_string() && arg.str().find(v.str()) != std::string::npos;
    if (arg.kind == Kind::kDict) return v.is_string() && arg.find(v.str());
    for (const Value& x : iterate(arg, line))
      if (equals(x, v)) return true;
    return false;
  }
  type_error(line, fmt::format("unknown test '{}'", name));
}

Value global_value(const std::string& name) {
  if (name == "range") {
    return Value::function([](CallArgs& a) {
      int64_t start = 0, stop, step = 1;
      if (a.positional.size() == 1) {
        stop = as_int(a.positional[0], a.line, "range stop");
      } else if (a.positional.size() == 2 || a.positional.size() == 3) {
        start = as_int(a.positional[0], a.line, "range start");
        stop = as_int(a.positional[1], a.line, "range stop");
        if (a.positional.size() == 3) step = as_int(a.positional[2], a.line, "range step");
      } else {
        type_error(a.line, "range expects 1 to 3 integer arguments");
      }
      if (step == 0) type_error(a.line, "range() arg 3 must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 100000) type_error(a.line, "range too big (the sandbox allows 100000 items)");
        out.push_back(Value::integer(i));
      }
      return Value::make_list(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    bool ns = name == "namespace";
    return Value::function([ns](CallArgs& a) {
      Value d = Value::make_dict();
      d.is_namespace = ns;
      for (const Value& p : a.positional) {
        if (p.kind != Kind::kDict) type_error(a.line, "namespace()/dict() positional argument must be a dict");
        for (const auto& [k, v] : *p.dict) d.set(k, v);
      }
      for (const auto& [k, v] : a.keyword) d.set(k, v);
      return d;
    });
  }
  if (name == "raise_exception") {
    return Value::function([](CallArgs& a) -> Value { throw InvalidArgument(to_str(a.get(0, "message"))); });
  }
  if (name == "strftime_now") {
    return Value::function([](CallArgs& a) {
      std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof(buf), to_str(a.get(0, "format")).c_str(), &tm);
      return Value::string(std::string(buf, n));
    });
  }
  return Value::undefined(name);
}

}  // namespace mx::jinja
