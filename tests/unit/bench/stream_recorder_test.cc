#include "bench/stream_recorder.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx::bench {

TEST(StreamRecorder, ChunkBasedTimingAndUsageTokens) {
  StreamRecorder rec(ApiKind::Completions, /*start_s=*/1.0, /*prompt_len=*/7);
  rec.on_event(R"({"choices":[{"text":"a"}]})", 1.25);
  rec.on_event(R"({"choices":[{"text":"bcd"}]})", 1.35);  // several tokens: still one ITL
  rec.on_event(R"({"choices":[{"text":"","finish_reason":"length"}]})", 1.40);
  rec.on_event(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5}})", 1.9);
  rec.on_event("[DONE]", 2.0);
  const RequestOutcome r = rec.finish();
  EXPECT_TRUE(r.success);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.25);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.10, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.05, 1e-12);
  EXPECT_NEAR(r.latency_s, 0.40, 1e-12);  // the usage-only chunk does not extend E2EL
  EXPECT_EQ(r.output_tokens, 5);
  EXPECT_EQ(r.generated_text, "abcd");
  EXPECT_EQ(r.prompt_len, 7);
}

TEST(StreamRecorder, ChatDeltasCarryTheText) {
  StreamRecorder rec(ApiKind::ChatCompletions, 0, 1);
  rec.on_event(R"({"choices":[{"delta":{"role":"assistant"}}]})", 0.1);
  rec.on_event(R"({"choices":[{"delta":{"content":"hi"}}]})", 0.2);
  const RequestOutcome r = rec.finish();
  EXPECT_EQ(r.generated_text, "hi");
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
  EXPECT_FALSE(r.output_tokens.has_value());
}

TEST(StreamRecorder, NoChoicesChunkIsAFailure) {
  StreamRecorder rec(ApiKind::Completions, 0, 1);
  rec.on_event(R"({"choices":[],"usage":{"completion_tokens":0}})", 0.1);
  EXPECT_FALSE(rec.finish().success);
}

TEST(StreamRecorder, BadJsonAndStreamedErrorsThrow) {
  StreamRecorder rec(ApiKind::Completions, 0, 1);
  EXPECT_THROW(rec.on_event("{not json", 0.1), Error);
  EXPECT_THROW(rec.on_event(R"({"error":{"message":"boom"}})", 0.1), Error);
}

}  // namespace mx::bench
