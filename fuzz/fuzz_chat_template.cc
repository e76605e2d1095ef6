// libFuzzer harness: the Jinja chat-template renderer on an arbitrary
// template source and arbitrary messages. Input: the template source, a NUL
// byte, then a JSON value used as `messages` (when it does not parse, a
// fixed two-message conversation is used) and, after a second NUL, a JSON
// object of extra template variables. Parse and render may only fail with
// mx::InvalidArgument (what the server turns into a 400 naming the
// template's complaint).
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace {

nlohmann::ordered_json parse_or(std::string_view text, nlohmann::ordered_json fallback) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t cut = in.find('\0');
  const std::string source(in.substr(0, cut));
  std::string_view messages_text, extra_text;
  if (cut != std::string_view::npos) {
    messages_text = in.substr(cut + 1);
    if (size_t cut2 = messages_text.find('\0'); cut2 != std::string_view::npos) {
      extra_text = messages_text.substr(cut2 + 1);
      messages_text = messages_text.substr(0, cut2);
    }
  }
  const nlohmann::ordered_json conversation = {{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", "Hi"}}};
  const auto messages = parse_or(messages_text, conversation);
  const auto extra = parse_or(extra_text, nullptr);
  try {
    const auto tmpl = mx::parse_chat_template(source, "<s>", "</s>");
    (void)tmpl->render_ordered(messages, nullptr, true, extra.is_object() ? extra : nlohmann::ordered_json(nullptr));
    (void)tmpl->render(nlohmann::json::parse(messages.dump()), nullptr, false);
  } catch (const mx::InvalidArgument&) {
  }
  return 0;
}
