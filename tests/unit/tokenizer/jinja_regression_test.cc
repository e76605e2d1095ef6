// Inputs the chat-template fuzzer (fuzz/fuzz_chat_template.cc) found, and the
// same bug in its neighbours: number conversions in the Jinja parser and
// builtins that threw std::out_of_range / std::invalid_argument past the
// template's error handling, which ended the process (std::terminate).
// Each must now be a template error (mx::InvalidArgument) or a Python-like
// value.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_eval.h"

namespace mx::jinja {
namespace {

std::string render(const std::string& source) { return Template(source).render(Dict{}); }

std::string error_of(const std::string& source) {
  try {
    render(source);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

// fuzz_chat_template crash-f0f1af3e: `m.<digits>` with more digits than an int64.
TEST(JinjaRegression, HugeIntegerSubscriptIsATemplateError) {
  const std::string found = "{% for m in messages %}<|{{ m.2222222222222222222222222222222222222222 }}{% endfor %}";
  EXPECT_NE(error_of(found).find("integer subscript out of range"), std::string::npos) << error_of(found);
  EXPECT_THROW(parse_chat_template("{{ messages[0].99999999999999999999 }}", "", ""), InvalidArgument);
}

TEST(JinjaRegression, SmallIntegerSubscriptStillWorks) {
  EXPECT_EQ(render("{{ [[7, 8]][0].1 }}"), "8");
}

TEST(JinjaRegression, FloatLiteralOutOfRangeIsATemplateError) {
  EXPECT_NE(error_of("{{ 1e999 }}").find("float literal out of range"), std::string::npos) << error_of("{{ 1e999 }}");
  EXPECT_EQ(render("{{ 1e300 > 1 }}"), "True");
}

TEST(JinjaRegression, HugeNumericAttributePathIsPastTheEnd) {
  EXPECT_EQ(render("{{ ([[1, 2]] | map(attribute='1') | list) }}"), "[2]");
  EXPECT_EQ(render("{{ ([[1, 2]] | map(attribute='99999999999999999999') | first) is defined }}"), "False");
}

TEST(JinjaRegression, NamedFormatFieldIsATemplateError) {
  EXPECT_EQ(render("{{ '{} and {1}'.format('a', 'b') }}"), "a and b");
  EXPECT_NE(error_of("{{ '{name}'.format(1) }}").find("only positional fields"), std::string::npos)
      << error_of("{{ '{name}'.format(1) }}");
}

}  // namespace
}  // namespace mx::jinja
