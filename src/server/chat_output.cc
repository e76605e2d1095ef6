#include "server/chat_output.h"

#include <algorithm>

namespace mx {

namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kSectionBegin = "<|tool_calls_section_begin|>";
constexpr std::string_view kSectionEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
constexpr std::string_view kArgBegin = "<|tool_call_argument_begin|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";

// Length of the longest suffix of s that is a proper prefix of marker.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \n\t\r");
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(" \n\t\r") - b + 1));
}
}  // namespace

ChatOutputParser::ChatOutputParser(bool starts_in_reasoning, bool parse_tool_calls)
    : state_(starts_in_reasoning ? State::Reasoning : State::Content), parse_tools_(parse_tool_calls) {}

std::vector<std::string_view> ChatOutputParser::markers() const {
  switch (state_) {
    case State::Reasoning: return {kThinkClose};
    case State::ToolSection: return {kSectionEnd};
    case State::Content: {
      std::vector<std::string_view> m;
      if (!seen_output_) m.push_back(kThinkOpen);
      if (parse_tools_) m.push_back(kSectionBegin);
      return m;
    }
  }
  return {};
}

void ChatOutputParser::emit(ChatTextDelta& out, std::string_view text) const {
  if (state_ == State::Reasoning) out.reasoning += text;
  else if (state_ == State::Content) out.content += text;
}

ChatTextDelta ChatOutputParser::feed(std::string_view text) {
  ChatTextDelta out;
  pending_ += text;
  while (!pending_.empty()) {
    // The earliest complete marker of the current state, if any.
    size_t best = std::string::npos;
    std::string_view found;
    for (auto m : markers()) {
      const size_t pos = pending_.find(m);
      if (pos < best) best = pos, found = m;
    }
    if (best == std::string::npos) {
      size_t hold = 0;
      for (auto m : markers()) hold = std::max(hold, partial_marker_suffix(pending_, m));
      const std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - hold);
      if (state_ == State::ToolSection) tool_text_ += ready;
      else emit(out, ready);
      if (!ready.empty() && trim(ready) != "") seen_output_ = true;
      pending_.erase(0, ready.size());
      break;
    }
    const std::string_view before = std::string_view(pending_).substr(0, best);
    if (state_ == State::ToolSection) tool_text_ += before;
    else emit(out, before);
    if (found == kThinkOpen && trim(before).empty()) state_ = State::Reasoning;
    else if (found == kThinkOpen) emit(out, found);  // not at the start: plain text
    else if (found == kThinkClose) state_ = State::Content;
    else if (found == kSectionBegin) state_ = State::ToolSection;
    else if (found == kSectionEnd) state_ = State::Content;
    seen_output_ = true;
    pending_.erase(0, best + found.size());
  }
  return out;
}

ChatTextDelta ChatOutputParser::finish() {
  ChatTextDelta out;
  if (state_ == State::ToolSection) tool_text_ += pending_;
  else emit(out, pending_);
  pending_.clear();
  if (!tool_text_.empty() || state_ == State::ToolSection) parse_tool_section();
  if (tool_calls_.empty() && !tool_text_.empty()) out.content += tool_text_;  // unparseable: show it as text
  return out;
}

void ChatOutputParser::parse_tool_section() {
  std::string_view rest = tool_text_;
  while (true) {
    const size_t begin = rest.find(kCallBegin);
    if (begin == std::string_view::npos) break;
    rest.remove_prefix(begin + kCallBegin.size());
    const size_t arg = rest.find(kArgBegin);
    const size_t end = rest.find(kCallEnd);
    if (arg == std::string_view::npos || end == std::string_view::npos || arg > end) break;
    ToolCall call;
    call.id = trim(rest.substr(0, arg));
    call.arguments = trim(rest.substr(arg + kArgBegin.size(), end - arg - kArgBegin.size()));
    std::string_view name = call.id;
    if (name.substr(0, 10) == "functions.") name.remove_prefix(10);
    if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) name = name.substr(0, colon);
    call.name = std::string(name);
    if (!call.name.empty()) tool_calls_.push_back(std::move(call));
    rest.remove_prefix(end + kCallEnd.size());
  }
}

}  // namespace mx
