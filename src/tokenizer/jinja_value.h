// Values of the Jinja interpreter, with Python's semantics where templates can
// see them: lists and dicts are shared by reference (a namespace's list that a
// macro appends to is the same list), dicts keep insertion order, printing
// follows Python's str()/repr().
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx::jinja {

// No string or list a template builds may exceed these: a chain of `join` or
// `replace` filters (or 'x' * 10**12) grows a string exponentially, and a
// template is not allowed to take the process's memory and time with it.
inline constexpr size_t kMaxStringBytes = size_t(16) << 20;
inline constexpr size_t kMaxListItems = size_t(1) << 20;
// Throws InvalidArgument "chat template line L: <what> would make a string of
// N bytes (the limit is 16 MiB)" when bytes > kMaxStringBytes.
void check_string_size(double bytes, int line, const char* what);
void check_list_size(double items, int line, const char* what);


struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, string keys
struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<std::string> s;  // kString; for kUndefined: the missing name (for messages)
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Function> fn;
  bool is_tuple = false;      // a list written (a, b): prints with parentheses
  bool is_namespace = false;  // namespace(): attributes may be assigned
  bool is_safe = false;       // Markup (macro output, |safe): |e leaves it alone

  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List items = {}, bool tuple = false);
  static Value make_dict(Dict items = {});
  static Value function(Function f);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  const std::string& str() const { return *s; }

  bool truthy() const;
  // Dict item by key, or nullptr.
  Value* find(const std::string& key) const;
  void set(const std::string& key, Value v) const;  // dict insert/replace
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;
  // Positional i, else keyword `name`, else `fallback`.
  Value get(size_t i, const char* name, Value fallback = Value::undefined()) const;
  bool has(size_t i, const char* name) const;
};

// Python's str(v) (what {{ v }} prints; undefined prints as nothing).
std::string to_str(const Value& v);
// Python's repr(v).
std::string repr(const Value& v);
std::string python_float_repr(double d);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as Python writes it.
struct JsonStyle {
  bool ensure_ascii = false;  // HF's tojson default
  int indent = -1;            // -1: None
  std::optional<std::string> item_sep, key_sep;  // nullopt: Python's defaults for the indent
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style, int line);

// Whether `v` is or, through lists and dicts, holds the dict `target` (a
// namespace assignment that would make a namespace hold itself is refused).
bool holds_dict(const Value& v, const Dict* target);

bool equals(const Value& a, const Value& b);
// <0, 0, >0; throws for types Python cannot order.
int compare(const Value& a, const Value& b, int line);
const char* type_name(const Value& v);

// Python str length and slicing in code points.
size_t code_point_length(const std::string& s);
std::vector<std::string> code_points(const std::string& s);

}  // namespace mx::jinja
