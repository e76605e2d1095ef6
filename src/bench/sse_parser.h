// Incremental parsers for a streamed HTTP/1.1 response: bytes arrive in
// arbitrary pieces (a TCP read can end mid-line, mid-chunk-size or mid-CRLF),
// so every parser keeps its partial state between feed() calls.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mx::bench {

// Server-sent events (the WHATWG text/event-stream rules that matter here):
// lines end in \n, \r\n or \r; "data:" lines (one optional space after the
// colon) accumulate; a blank line dispatches the event; ':' lines are
// comments; other fields are ignored.
class SseParser {
 public:
  using OnEvent = std::function<void(std::string_view data)>;
  explicit SseParser(OnEvent on_event) : on_event_(std::move(on_event)) {}
  void feed(std::string_view bytes);
  // The stream ended: an event whose blank line never came is dispatched.
  void finish();

 private:
  void handle_line(std::string_view line);
  OnEvent on_event_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

// The status line, headers and body framing (chunked, Content-Length, or until
// the connection closes) of one HTTP/1.1 response. Body bytes go to on_body.
class HttpResponseParser {
 public:
  using OnBody = std::function<void(std::string_view bytes)>;
  explicit HttpResponseParser(OnBody on_body) : on_body_(std::move(on_body)) {}
  // Throws mx::Error on a malformed response.
  void feed(std::string_view bytes);
  // The peer closed the connection: completes a close-delimited body.
  void on_eof();

  bool headers_done() const { return state_ > State::Headers; }
  bool complete() const { return state_ == State::Done; }
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }

 private:
  enum class State { StatusLine, Headers, ChunkSize, ChunkData, ChunkDataEnd, Trailers, Body, Done };
  void handle_header_line(std::string_view line);
  void start_body();
  size_t feed_line(std::string_view bytes, size_t pos, bool* complete);

  OnBody on_body_;
  State state_ = State::StatusLine;
  std::string line_;
  int status_ = 0;
  std::string reason_;
  bool chunked_ = false;
  int64_t content_length_ = -1;
  uint64_t remaining_ = 0;
};

}  // namespace mx::bench
