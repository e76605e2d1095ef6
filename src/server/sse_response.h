// Streams a generation to the client as Server-Sent Events. Shared by the
// completions and chat routes; Stream provides `finished`, `next(timeout)`
// (the SSE text ready so far) and `gen` (the Generation to abort).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include <httplib.h>

namespace mx {

template <typename Stream>
void respond_sse(httplib::Response& res, std::shared_ptr<Stream> stream) {
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        if (stream->finished) {
          sink.done();
          return true;
        }
        const std::string text = stream->next(std::chrono::milliseconds(20));
        if (!text.empty() && !sink.write(text.data(), text.size())) return false;  // client gone
        if (stream->finished) sink.done();
        return true;
      },
      // No-op when finished; frees the KV blocks when the client left.
      [stream](bool) { stream->gen->abort(); });
}

}  // namespace mx
