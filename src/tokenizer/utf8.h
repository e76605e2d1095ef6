// UTF-8 helpers shared by the tokenizers, the detokenizer and the Jinja
// interpreter. Invalid input is handled the way Python's
// bytes.decode("utf-8", errors="replace") does it (one U+FFFD per maximal
// invalid subpart), so our text matches the reference packages byte for byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mx::utf8 {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when the
// bytes there do not start one (truncated, overlong, surrogate, > U+10FFFF).
size_t valid_sequence_length(std::string_view s, size_t i);

// Number of bytes of the maximal subpart of an ill-formed sequence at s[i]
// (always >= 1): the unit Python replaces with one U+FFFD.
size_t invalid_subpart_length(std::string_view s, size_t i);

// Python's bytes.decode("utf-8", errors="replace").
std::string decode_replace(std::string_view bytes);

// Length of the longest prefix of s that can be emitted now: everything except
// a trailing sequence that is an incomplete (but so far valid) UTF-8 prefix.
size_t complete_prefix_length(std::string_view s);

// Decodes the code point of a well-formed sequence of length len at s[i].
uint32_t decode_at(std::string_view s, size_t i, size_t len);

void append_code_point(std::string& out, uint32_t cp);

// Code points in a (valid) UTF-8 string.
size_t count_code_points(std::string_view s);

// Python's str.isspace() for one code point.
bool is_python_space(uint32_t cp);

}  // namespace mx::utf8
