// Splits a chat model's streamed text into reasoning (<think>...</think>),
// visible content, and Kimi-style tool calls:
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
//   <|tool_call_argument_begin|>{json}<|tool_call_end|>...<|tool_calls_section_end|>
// Text that may be the start of a marker is held back until it is decided.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mx {

struct ToolCall {
  std::string id;         // "functions.get_weather:0", as the model wrote it
  std::string name;       // "get_weather"
  std::string arguments;  // JSON text
};

struct ChatTextDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ChatOutputParser {
 public:
  ChatOutputParser(bool starts_in_reasoning, bool parse_tool_calls);
  ChatTextDelta feed(std::string_view text);
  // End of output: releases held text and parses the tool-call section.
  ChatTextDelta finish();
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }

 private:
  enum class State { Content, Reasoning, ToolSection };
  std::vector<std::string_view> markers() const;
  void emit(ChatTextDelta& out, std::string_view text) const;
  void parse_tool_section();

  State state_;
  bool parse_tools_;
  bool seen_output_ = false;  // <think> opens reasoning only at the very start
  std::string pending_;
  std::string tool_text_;
  std::vector<ToolCall> tool_calls_;
};

}  // namespace mx
