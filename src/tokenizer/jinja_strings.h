// Python str methods on UTF-8 strings, for the Jinja interpreter. Whitespace
// is Python's str.isspace(); case mapping is ASCII only.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace mx::jinja::pystr {

enum class Side { kLeft = 1, kRight = 2, kBoth = 3 };
// str.strip/lstrip/rstrip(chars): chars = nullopt strips whitespace.
std::string strip(const std::string& s, const std::optional<std::string>& chars, Side side);
// str.split(sep, maxsplit): sep = nullopt splits on whitespace runs.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, long maxsplit);
std::string replace(const std::string& s, const std::string& old, const std::string& with, long count);
std::string upper(std::string s);
std::string lower(std::string s);
std::string capitalize(const std::string& s);
std::string title(const std::string& s);
// str.splitlines() (without keepends).
std::vector<std::string> splitlines(const std::string& s);
// Python str.find in code points, -1 when absent.
long find(const std::string& s, const std::string& sub);
long count(const std::string& s, const std::string& sub);

}  // namespace mx::jinja::pystr
