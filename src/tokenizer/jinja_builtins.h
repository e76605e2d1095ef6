// Jinja's built-in filters, tests, global functions and the Python methods
// templates call on strings, lists and dicts.
#pragma once
#include <string>

#include "tokenizer/jinja_value.h"

namespace mx::jinja {

// Applies filter `name`; throws InvalidArgument naming an unknown filter.
Value apply_filter(const std::string& name, const Value& operand, CallArgs& args);
// Runs test `name` (`x is name(args)`); throws InvalidArgument naming an unknown test.
bool apply_test(const std::string& name, const Value& operand, CallArgs& args);
// obj.name: dict items, methods of str/list/dict, namespace attributes.
Value get_attribute(const Value& obj, const std::string& name, int line);
// obj[key]: dict items, list/str indexes (negative from the end).
Value get_item(const Value& obj, const Value& key, int line);
// Globals: range, namespace, dict, raise_exception, strftime_now; undefined otherwise.
Value global_value(const std::string& name);
// Python len() for str/list/dict (undefined counts as empty).
int64_t length_of(const Value& v, int line);
// The elements a for loop (or a filter) walks: list items, dict keys, characters.
List iterate(const Value& v, int line);

}  // namespace mx::jinja
