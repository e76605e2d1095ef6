#include "tokenizer/jinja_strings.h"

#include "tokenizer/utf8.h"

namespace mx::jinja::pystr {
namespace {

// Splits s into code points (as byte ranges).
std::vector<std::pair<size_t, size_t>> cps(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8::valid_sequence_length(s, i);
    if (n == 0) n = 1;
    out.emplace_back(i, n);
    i += n;
  }
  return out;
}

bool is_space_at(const std::string& s, size_t i, size_t n) {
  return utf8::valid_sequence_length(s, i) == n && utf8::is_python_space(utf8::decode_at(s, i, n));
}

}  // namespace

std::string strip(const std::string& s, const std::optional<std::string>& chars, Side side) {
  auto points = cps(s);
  std::vector<std::string> set;
  if (chars)
    for (auto [b, n] : cps(*chars)) set.push_back(chars->substr(b, n));
  auto strippable = [&](size_t k) {
    auto [b, n] = points[k];
    if (!chars) return is_space_at(s, b, n);
    std::string c = s.substr(b, n);
    for (const auto& x : set)
      if (x == c) return true;
    return false;
  };
  size_t lo = 0, hi = points.size();
  if (static_cast<int>(side) & 1)
    while (lo < hi && strippable(lo)) ++lo;
  if (static_cast<int>(side) & 2)
    while (hi > lo && strippable(hi - 1)) --hi;
  if (lo == hi) return "";
  size_t begin = points[lo].first, end = points[hi - 1].first + points[hi - 1].second;
  return s.substr(begin, end - begin);
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, pos);
      if (at == std::string::npos) break;
      out.push_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  auto points = cps(s);
  size_t k = 0;
  while (k < points.size()) {
    while (k < points.size() && is_space_at(s, points[k].first, points[k].second)) ++k;
    if (k == points.size()) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
      // The rest, with trailing whitespace stripped, is the last item.
      out.push_back(strip(s.substr(points[k].first), std::nullopt, Side::kRight));
      return out;
    }
    size_t start = points[k].first;
    while (k < points.size() && !is_space_at(s, points[k].first, points[k].second)) ++k;
    size_t end = k < points.size() ? points[k].first : s.size();
    out.push_back(s.substr(start, end - start));
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with, long count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` between every code point (and at both ends).
    auto points = cps(s);
    long done = 0;
    for (auto [b, n] : points) {
      if (count < 0 || done < count) out += with, ++done;
      out += s.substr(b, n);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  long done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + with;
    pos = at + old.size();
    ++done;
  }
  return out + s.substr(pos);
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}

std::string title(const std::string& s) {
  // Python's str.title: a letter after a non-letter starts a word.
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = prev_letter ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    prev_letter = letter || (static_cast<unsigned char>(c) >= 0x80);
  }
  return out;
}

std::vector<std::string> splitlines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' || c == '\x1e') {
      out.push_back(s.substr(start, i - start));
      i += (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
      start = i;
    } else {
      ++i;
    }
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

long find(const std::string& s, const std::string& sub) {
  size_t at = s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<long>(utf8::count_code_points(std::string_view(s).substr(0, at)));
}

long count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<long>(utf8::count_code_points(s)) + 1;
  long n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

}  // namespace mx::jinja::pystr
