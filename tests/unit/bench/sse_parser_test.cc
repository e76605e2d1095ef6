#include "bench/sse_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace mx::bench {
namespace {

std::vector<std::string> parse_sse_in_pieces(const std::string& stream, size_t piece) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) { events.emplace_back(d); });
  for (size_t i = 0; i < stream.size(); i += piece) p.feed(std::string_view(stream).substr(i, piece));
  p.finish();
  return events;
}

}  // namespace

TEST(SseParser, SameEventsForEverySplitOfTheStream) {
  const std::string stream =
      ": keep-alive\r\n\r\n"
      "data: {\"a\":1}\r\n\r\n"
      "data:{\"b\":2}\n\n"
      "event: ignored\ndata: line1\ndata: line2\n\n"
      "data: [DONE]\r\r";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece)
    EXPECT_EQ(parse_sse_in_pieces(stream, piece), expected) << "piece size " << piece;
}

TEST(SseParser, CrLfSplitAcrossReadsIsOneLineEnd) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) { events.emplace_back(d); });
  p.feed("data: x\r");
  p.feed("\ndata: y\r");
  p.feed("\n\r");
  p.feed("\n");
  EXPECT_EQ(events, std::vector<std::string>{"x\ny"});
}

TEST(SseParser, UnterminatedEventIsDeliveredAtFinish) {
  EXPECT_EQ(parse_sse_in_pieces("data: tail", 3), std::vector<std::string>{"tail"});
}

namespace {
struct Parsed {
  int status = 0;
  std::string body;
  bool complete = false;
};

Parsed parse_http_in_pieces(const std::string& response, size_t piece, bool eof = false) {
  Parsed out;
  HttpResponseParser p([&](std::string_view b) { out.body.append(b); });
  for (size_t i = 0; i < response.size(); i += piece) p.feed(std::string_view(response).substr(i, piece));
  if (eof) p.on_eof();
  out.status = p.status();
  out.complete = p.complete();
  return out;
}
}  // namespace

TEST(HttpResponseParser, ChunkedBodyForEverySplit) {
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
      "f\r\ndata: {\"a\":1}\n\n\r\n"
      "C;ext=1\r\ndata: [DONE]\r\n"
      "0\r\n\r\n";
  for (size_t piece = 1; piece <= response.size(); ++piece) {
    const Parsed p = parse_http_in_pieces(response, piece);
    EXPECT_EQ(p.status, 200);
    EXPECT_EQ(p.body, "data: {\"a\":1}\n\ndata: [DONE]") << "piece size " << piece;
    EXPECT_TRUE(p.complete);
  }
}

TEST(HttpResponseParser, ContentLengthAndCloseDelimitedBodies) {
  const Parsed sized = parse_http_in_pieces(
      "HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nhello", 4);
  EXPECT_EQ(sized.status, 400);
  EXPECT_EQ(sized.body, "hello");
  EXPECT_TRUE(sized.complete);
  const Parsed until_close = parse_http_in_pieces("HTTP/1.0 200 OK\r\n\r\nabc", 2, /*eof=*/true);
  EXPECT_EQ(until_close.body, "abc");
  EXPECT_TRUE(until_close.complete);
}

TEST(HttpResponseParser, RejectsGarbage) {
  HttpResponseParser p([](std::string_view) {});
  EXPECT_THROW(p.feed("SSH-2.0-OpenSSH\r\n"), Error);
  HttpResponseParser q([](std::string_view) {});
  EXPECT_THROW(q.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), Error);
}

}  // namespace mx::bench
