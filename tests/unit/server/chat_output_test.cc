#include "server/chat_output.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

struct Parsed {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// Feeds the text in pieces of `piece` bytes (1 = every split point).
Parsed parse(const std::string& text, bool in_reasoning, bool tools, size_t piece) {
  ChatOutputParser p(in_reasoning, tools);
  Parsed out;
  for (size_t i = 0; i < text.size(); i += piece) {
    ChatTextDelta d = p.feed(text.substr(i, piece));
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  ChatTextDelta d = p.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  out.calls = p.tool_calls();
  return out;
}

const std::string kToolText =
    "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}"
    "<|tool_call_end|><|tool_calls_section_end|>";

TEST(ChatOutput, ParsesKimiToolCallsWhateverTheChunking) {
  for (size_t piece : {1, 3, 7, 1000}) {
    Parsed p = parse(kToolText, false, true, piece);
    EXPECT_EQ(p.content, "Let me check.") << piece;
    ASSERT_EQ(p.calls.size(), 2u) << piece;
    EXPECT_EQ(p.calls[0].id, "functions.get_weather:0");
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Paris\"}");
    EXPECT_EQ(p.calls[1].name, "get_time");
  }
}

TEST(ChatOutput, LeavesMarkersAloneWithoutTools) {
  Parsed p = parse(kToolText, false, false, 5);
  EXPECT_EQ(p.content, kToolText);
  EXPECT_TRUE(p.calls.empty());
}

TEST(ChatOutput, SplitsReasoning) {
  for (size_t piece : {1, 4, 100}) {
    Parsed p = parse("<think>step one</think>The answer.", false, false, piece);
    EXPECT_EQ(p.reasoning, "step one") << piece;
    EXPECT_EQ(p.content, "The answer.") << piece;
    // The prompt already opened <think> (Kimi thinking templates).
    p = parse("hmm</think>Done", true, false, piece);
    EXPECT_EQ(p.reasoning, "hmm");
    EXPECT_EQ(p.content, "Done");
  }
}

TEST(ChatOutput, ThinkTagLaterIsPlainText) {
  Parsed p = parse("a <think> b", false, false, 2);
  EXPECT_EQ(p.content, "a <think> b");
  EXPECT_EQ(p.reasoning, "");
}

TEST(ChatOutput, ReleasesAHeldPartialMarkerAtTheEnd) {
  Parsed p = parse("x <|tool_calls", false, true, 1);
  EXPECT_EQ(p.content, "x <|tool_calls");
}

TEST(ChatOutput, BrokenToolSectionIsShownAsText) {
  Parsed p = parse("<|tool_calls_section_begin|>garbage", false, true, 4);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "garbage");
}

}  // namespace
}  // namespace mx
