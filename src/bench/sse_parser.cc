#include "bench/sse_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/error.h"

namespace mx::bench {

void SseParser::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the \n of a \r\n that already ended the line
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = (c == '\r');
    if (c == '\r' || c == '\n') {
      handle_line(line_);
      line_.clear();
    } else {
      line_.push_back(c);
    }
  }
}

void SseParser::finish() {
  if (!line_.empty()) {
    handle_line(line_);
    line_.clear();
  }
  handle_line("");
}

void SseParser::handle_line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) {
      const std::string data = std::move(data_);
      data_.clear();
      has_data_ = false;
      on_event_(data);
    }
    return;
  }
  if (line.front() == ':') return;  // comment / keep-alive
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower((unsigned char)x) == std::tolower((unsigned char)y);
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

// Appends bytes from `pos` up to and including '\n' to line_ (without the
// CR/LF); returns how many bytes were used and whether the line is complete.
size_t HttpResponseParser::feed_line(std::string_view bytes, size_t pos, bool* complete) {
  const size_t nl = bytes.find('\n', pos);
  *complete = nl != std::string_view::npos;
  const size_t end = *complete ? nl : bytes.size();
  line_.append(bytes.substr(pos, end - pos));
  if (line_.size() > 64 * 1024) fail("HTTP response line longer than 64 KiB");
  if (*complete && !line_.empty() && line_.back() == '\r') line_.pop_back();
  return end - pos + (*complete ? 1 : 0);
}

void HttpResponseParser::feed(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size() && state_ != State::Done) {
    if (state_ == State::ChunkData || state_ == State::Body) {
      const size_t n = state_ == State::Body && content_length_ < 0
                           ? bytes.size() - pos
                           : size_t(std::min<uint64_t>(remaining_, bytes.size() - pos));
      on_body_(bytes.substr(pos, n));
      pos += n;
      if (state_ == State::Body && content_length_ < 0) continue;
      remaining_ -= n;
      if (remaining_ == 0) state_ = state_ == State::Body ? State::Done : State::ChunkDataEnd;
      continue;
    }
    bool line_complete = false;
    pos += feed_line(bytes, pos, &line_complete);
    if (!line_complete) break;
    const std::string current = line_;
    line_.clear();
    switch (state_) {
      case State::StatusLine: {
        // "HTTP/1.1 200 OK"
        if (current.rfind("HTTP/", 0) != 0) fail("not an HTTP response: '{}'", current.substr(0, 80));
        const size_t sp = current.find(' ');
        if (sp == std::string::npos) fail("bad HTTP status line '{}'", current);
        const std::string_view rest = std::string_view(current).substr(sp + 1);
        auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), status_);
        if (ec != std::errc()) fail("bad HTTP status line '{}'", current);
        reason_ = std::string(trim(std::string_view(p, rest.data() + rest.size() - p)));
        state_ = State::Headers;
        break;
      }
      case State::Headers:
        if (current.empty()) start_body();
        else handle_header_line(current);
        break;
      case State::ChunkSize: {
        const std::string_view size_text = trim(std::string_view(current).substr(0, current.find(';')));
        uint64_t size = 0;
        auto [p, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
        if (ec != std::errc() || p != size_text.data() + size_text.size() || size_text.empty())
          fail("bad chunk size line '{}'", current);
        remaining_ = size;
        state_ = size == 0 ? State::Trailers : State::ChunkData;
        break;
      }
      case State::ChunkDataEnd:
        if (!current.empty()) fail("chunk data not followed by CRLF");
        state_ = State::ChunkSize;
        break;
      case State::Trailers:
        if (current.empty()) state_ = State::Done;
        break;
      default:
        break;
    }
  }
}

void HttpResponseParser::handle_header_line(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) fail("bad HTTP header line '{}'", line);
  const std::string_view name = trim(line.substr(0, colon));
  const std::string_view value = trim(line.substr(colon + 1));
  if (iequals(name, "transfer-encoding")) {
    chunked_ = value.find("chunked") != std::string_view::npos ||
               value.find("Chunked") != std::string_view::npos;
  } else if (iequals(name, "content-length")) {
    int64_t n = -1;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || n < 0) fail("bad Content-Length '{}'", value);
    content_length_ = n;
  }
}

void HttpResponseParser::start_body() {
  if (chunked_) {
    state_ = State::ChunkSize;
  } else if (content_length_ >= 0) {
    remaining_ = uint64_t(content_length_);
    state_ = remaining_ == 0 ? State::Done : State::Body;
  } else {
    state_ = State::Body;  // until the connection closes
  }
}

void HttpResponseParser::on_eof() {
  if (state_ == State::Body && content_length_ < 0) state_ = State::Done;
}

}  // namespace mx::bench
