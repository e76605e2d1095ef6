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

// fuzz_chat_template crash-62775399: a macro that calls itself overflowed the
// stack (SIGSEGV) when rendered, i.e. on every chat request to a model whose
// template does this.
TEST(JinjaRegression, EndlesslyRecursiveMacroIsATemplateError) {
  const std::string found =
    "{% macro f(x, y=2) %}{\377{ x * x ;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;* \217y }}{{ f(6) | l"
    "ist }}{{ {'k': 1}.it*emcapraise_exception('no') if false }}\020\042type\042: \042function\042"
    ", \042f\177nction\042: \200\200\200\200\200\200\200\200\200\200\200\200\200\200\200\200\200"
    "\200\200\200\200\200\200\200\200\200\200\200\200\200{\042name\042content\042:}{% endmacro "
    "%}{{ f(6) | list }}{{ {'k': 1}.it*emcapraise_exception('no') if false }}\020\042type\042: "
    "\042function\042, \042f\177nction\042: \200\200\200\200\200\200\200\200\200\200\200\200\200"
    "\200\200\200\200\200\200\200\200\200\200\200\200\200\200\200\200\200{\042name\042content\042"
    ": \04242\377\377\377\377\377\377\377\377\042, \042tool_call_id\042: \0421\042}]";
  EXPECT_NE(error_of(found).find("nested more than 100 calls deep"), std::string::npos) << error_of(found);
  EXPECT_NE(error_of("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}").find("endless recursion"), std::string::npos);
  // Bounded recursion still works.
  EXPECT_EQ(render("{% macro c(n) %}{{ n }}{% if n > 0 %}{{ c(n - 1) }}{% endif %}{% endmacro %}{{ c(5) }}"), "543210");
}

// Found while fixing the above: integer ** overflowed int64 (undefined
// behaviour) and looped `power` times.
TEST(JinjaRegression, IntegerPowerPastInt64IsAFloat) {
  EXPECT_EQ(render("{{ 2 ** 10 }} {{ 0 ** 0 }} {{ (-1) ** 9999999999999 }} {{ 1 ** 9999999999999 }}"), "1024 1 -1 1");
  EXPECT_EQ(render("{{ 2 ** 62 }}"), "4611686018427387904");
  EXPECT_EQ(render("{{ (2 ** 64) > 2 ** 62 }} {{ (3 ** 999999999999) > 1 }}"), "True True");
}

// fuzz_chat_template crash-c52d584d: about 1,000 nested '{' and '(' overflowed
// the stack in the recursive-descent parser (the input, verbatim, below).
TEST(JinjaRegression, DeeplyNestedTemplateIsATemplateError) {
  const std::string found =
    "{% macro f(x, y=2) %}{{ x * x * y }}{% endmacro %}{{ {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{(((((((((((((((((((((((((((((((((((((((((((((((((((((((({{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{(((((((((((((((((((((((((((((((((((((((((((((((((((((((({{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{(((((((((((((((((((((((((((((((((((((((((((((((((((((((({{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{(((((((((((((((((((((((((((((((((((((((((((((((((((((((({{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{(((((((((((((((((((((((((((((((((({{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{(((((((((((((((((((((((((((((((((((((((((((((((((((((((({{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{raise_exceptio"
    "n('no') if false }}";
  EXPECT_NE(error_of(found).find("nested more than 100 levels deep"), std::string::npos) << error_of(found);
  for (const std::string& open : {"(", "[", "-", "not ", "{% if true %}"}) {
    std::string deep = open == "{% if true %}" ? "" : "{{ ";
    for (int i = 0; i < 20000; ++i) deep += open;
    if (open != "{% if true %}") deep += "1 }}";
    EXPECT_NE(error_of(deep).find("nested more than 100 levels deep"), std::string::npos) << open;
  }
  // Real templates nest a few levels: 20 brackets inside 10 blocks still parse.
  std::string ok;
  for (int i = 0; i < 10; ++i) ok += "{% if true %}";
  ok += "{{ " + std::string(20, '(') + "1" + std::string(20, ')') + " }}";
  for (int i = 0; i < 10; ++i) ok += "{% endif %}";
  EXPECT_EQ(render(ok), "1");
}

// fuzz_chat_template oom-361a0ea3: 'a,b'.split('') appended empty strings
// until memory ran out (Python raises ValueError: empty separator).
TEST(JinjaRegression, SplitOnEmptySeparatorIsATemplateError) {
  EXPECT_NE(error_of("{{ 'a,b'.split('') | join('-') }}").find("empty separator"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a,b'.rsplit('') }}").find("empty separator"), std::string::npos);
  EXPECT_EQ(render("{{ 'a,b'.split(',') | join('-') }} {{ ' a  b '.split() | join('-') }}"), "a-b a-b");
}

}  // namespace
}  // namespace mx::jinja

namespace mx::jinja {
namespace {

// fuzz_chat_template timeout-f66376fd / timeout-fb58f6a5: chained `join`
// filters over a string multiply its length at every step (exponential time
// and memory). Every string a template builds is capped at 16 MiB.
TEST(JinjaRegression, ExponentialJoinChainIsATemplateError) {
  const std::string chain = "{{ 'system' | join('0123456789012345678901234567890') | join('0123456789012345678901234567890')"
                            " | join('0123456789012345678901234567890') | join('0123456789012345678901234567890')"
                            " | join('0123456789012345678901234567890') | join('0123456789012345678901234567890') }}";
  EXPECT_NE(error_of(chain).find("the limit is 16 MiB"), std::string::npos) << error_of(chain);
  EXPECT_EQ(render("{{ 'abc' | join('-') }}"), "a-b-c");
}

TEST(JinjaRegression, HugeRepetitionsAndReplacementsAreTemplateErrors) {
  EXPECT_NE(error_of("{{ 'x' * 1000000000000 }}").find("the limit is 16 MiB"), std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 1000000000 }}").find("would make a list"), std::string::npos);
  EXPECT_NE(error_of("{% set s = 'y' * 1000000 %}{{ s.replace('', '0123456789012345678901234567890') }}").find("replace"),
            std::string::npos);
  EXPECT_NE(error_of("{% set s = 'y' * 1000000 %}{{ s | replace('y', 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz') }}")
                .find("the limit is 16 MiB"),
            std::string::npos);
  EXPECT_EQ(render("{{ 'ab' * 3 }}{{ 'aXa' | replace('a', 'bb') }}{{ ''.join(['p', 'q']) }}"), "abababbbXbbpq");
}

// fuzz_chat_template crash-02c41fa7 (stack overflow): `{% set ns.n = ns %}`
// made a namespace hold itself, and printing it recursed forever.
TEST(JinjaRegression, NamespaceThatWouldHoldItselfIsATemplateError) {
  const std::string found = "{%- set ns = namespace(n=0) -%}{% set ns.n = ns %}{{ ns.n }}";
  EXPECT_NE(error_of(found).find("holds the namespace 'ns' itself"), std::string::npos) << error_of(found);
  // Through a list too; another namespace is fine.
  EXPECT_NE(error_of("{% set ns = namespace(n=0) %}{% set ns.n = [1, [ns]] %}").find("itself"), std::string::npos);
  EXPECT_EQ(render("{% set a = namespace(x=0) %}{% set b = namespace(y=7) %}{% set a.x = b %}{{ a.x.y }}"), "7");
}

// The walks over values (print, tojson, ==, sort) stop at a nesting depth
// instead of overflowing the stack on a value nested 600 levels deep.
TEST(JinjaRegression, DeeplyNestedValueIsATemplateErrorNotAStackOverflow) {
  const std::string deep = "{% set ns = namespace(x=0) %}{% for i in range(600) %}{% set ns.x = [ns.x] %}{% endfor %}";
  for (const char* use : {"{{ ns.x }}", "{{ ns.x | tojson }}", "{{ ns.x == ns.x }}", "{{ [ns.x, ns.x] | sort }}"})
    EXPECT_NE(error_of(deep + use).find("nested deeper than 512 levels"), std::string::npos) << use << ": "
                                                                                            << error_of(deep + use);
  EXPECT_EQ(render("{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
            "[[[0]]]");
}

}  // namespace
}  // namespace mx::jinja
