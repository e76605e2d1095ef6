// The Jinja subset: constructs, HF's whitespace options, Python semantics, errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_eval.h"

namespace mx::jinja {
namespace {

std::string render(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  Dict globals;
  for (const auto& [k, v] : vars.items()) globals.emplace_back(k, Value::from_json(v));
  return Template(source).render(globals);
}

std::string error_of(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  try {
    render(source, vars);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, TextAndOutput) {
  EXPECT_EQ(render("a {{ x }} b", {{"x", 3}}), "a 3 b");
  EXPECT_EQ(render("{{ 'x' ~ 1 ~ none }}"), "x1None");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }}"), "[1, 'a', None, True]");
  EXPECT_EQ(render("{{ {'k': \"it's\"} }}"), "{'k': \"it's\"}");
  EXPECT_EQ(render("{{ 1.0 }} {{ 2.5e-7 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}"),
            "1.0 2.5e-07 3.5 3 -4 2 1024");
  EXPECT_EQ(render("{{ missing }}|"), "|");
  EXPECT_EQ(render("{{ (1, 2) }} {{ (1,) }}"), "(1, 2) (1,)");
}

TEST(Jinja, TrimAndLstripBlocksLikeHf) {
  // trim_blocks drops the newline after a tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("  {% if true %}\n  a\n  {% endif %}\n  b {{ 1 }}\n"), "  a\n  b 1");
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif %}\n"), "xy");
  EXPECT_EQ(render("{{ 'a' -}}   \n  {{- 'b' }}"), "ab");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("a\n{# comment #}\nb"), "a\nb");
  EXPECT_EQ(render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(Jinja, ForLoopVariablesAndScoping) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %},{% endfor %}",
                   {{"xs", {"a", "b", "c"}}}),
            "1aF,2b,3cL,");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}), "b=1;a=2;");
  // A set inside the loop lives only for that iteration (jinja2).
  EXPECT_EQ(render("{% set x = 7 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{% endfor %}[{{ x }}]"), "77[7]");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "10");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"), "02");
  EXPECT_EQ(render("{% for i in range(3, -1, -1) %}{{ i }}{{ loop.cycle('a', 'b') }}{% endfor %}"), "3a2b1a0b");
}

TEST(Jinja, MacrosSeeTopLevelValuesAtCallTime) {
  EXPECT_EQ(render("{% macro f(a, b='d') %}[{{ a }}{{ b }}{{ y }}]{% endmacro %}{% set y = 3 %}{{ f(1) }}{{ f(1, b=2) }}"),
            "[1d3][123]");
}

TEST(Jinja, FiltersAndTests) {
  nlohmann::ordered_json vars = {{"d", {{"b", "ü"}, {"a", {1, 2.5, nullptr}}}}};
  EXPECT_EQ(render("{{ d | tojson }}", vars), "{\"b\": \"ü\", \"a\": [1, 2.5, null]}");
  EXPECT_EQ(render("{{ d | tojson(ensure_ascii=True) }}", vars), "{\"b\": \"\\u00fc\", \"a\": [1, 2.5, null]}");
  EXPECT_EQ(render("{{ d | tojson(separators=(',', ':')) }}", vars), "{\"b\":\"ü\",\"a\":[1,2.5,null]}");
  EXPECT_EQ(render("{{ d | tojson(indent=2) }}", vars), "{\n  \"b\": \"ü\",\n  \"a\": [\n    1,\n    2.5,\n    null\n  ]\n}");
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ [3,1,2] | length }}|{{ [3,1,2] | first }}{{ [3,1,2] | last }}|{{ [1,2] | join('-') }}"),
            "x|3|32|1-2");
  EXPECT_EQ(render("{{ u | default('dflt') }}{{ '' | default('e', true) }}{{ 'Ab' | upper }}{{ 'Ab' | lower }}"), "dflteABab");
  EXPECT_EQ(render("{{ 'a-b-c' | replace('-', '+') }}{{ 42 | string }}{{ '17' | int + 1 }}{{ 'x' | int }}"), "a+b+c42180");
  EXPECT_EQ(render("{{ [{'n': 'a'}, {'n': 'b'}] | map(attribute='n') | join }}{{ [1, none, 2] | select | list }}"), "ab[1, 2]");
  EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}] | selectattr('r', 'equalto', 'a') | list | length }}"), "1");
  EXPECT_EQ(render("{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 3 is odd }}{{ 1 is number }}{{ u is not defined }}"),
            "FalseTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 'b' in 'abc' }}{{ 2 in [1,2] }}{{ 'k' in {'k': 1} }}{{ 'z' not in 'abc' }}"), "TrueTrueTrueTrue");
}

TEST(Jinja, StringMethodsAndSlices) {
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}"), "TrueTrue");
  EXPECT_EQ(render("{{ ' a b '.split() }}{{ 'a,b'.split(',') }}{{ 'xxhixx'.strip('x') }}{{ '  h'.lstrip() }}{{ 'h  '.rstrip() }}"),
            "['a', 'b']['a', 'b']hihh");
  EXPECT_EQ(render("{{ 'hello'[1:3] }}{{ 'hello'[::-1] }}{{ [1,2,3,4][-2:] }}{{ 'héllo'[1] }}"), "elolleh[3, 4]é");
  EXPECT_EQ(render("{{ m.get('a') }}{{ m.get('zz', 5) }}{{ m['zz'] is defined }}{{ m.a }}", {{"m", {{"a", 1}}}}), "15False1");
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'x') }}"), "1 and x");
}

TEST(Jinja, ConditionalExpressionsAndBooleanOperators) {
  EXPECT_EQ(render("{{ 'y' if x else 'n' }}{{ x or 'fallback' }}{{ 1 and 2 }}{{ not x }}", {{"x", false}}), "nfallback2True");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}"), "TrueFalse");
  EXPECT_EQ(render("{% if a %}A{% elif b %}B{% else %}C{% endif %}", {{"a", false}, {"b", true}}), "B");
  EXPECT_EQ(render("{% set x %}in{{ 1 }}{% endset %}{{ x }}"), "in1");
  EXPECT_EQ(render("{% filter upper %}ab{% endfilter %}"), "AB");
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_NE(error_of("a\n{% include 'x' %}").find("line 2: unsupported tag 'include'"), std::string::npos);
  EXPECT_NE(error_of("{{ x | frobnicate }}").find("unknown filter 'frobnicate'"), std::string::npos);
  EXPECT_NE(error_of("\n\n{{ x is frob }}").find("line 3: unknown test 'frob'"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}").find("expected {% endif %}"), std::string::npos);
  EXPECT_NE(error_of("{{ x.y }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand type(s) for +: 'str' and 'int'"), std::string::npos);
  EXPECT_EQ(error_of("{{ raise_exception('Only user and assistant roles') }}"), "Only user and assistant roles");
  // The HF sandbox forbids mutating lists.
  EXPECT_NE(error_of("{% set l = [] %}{% set _ = l.append(1) %}").find("access to attribute 'append' of 'list' object is unsafe"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'abc").find("unterminated string"), std::string::npos);
}

TEST(ChatTemplate, RendersWithHfVariables) {
  auto t = parse_chat_template(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if tools is none %}[no tools]{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}{{ flag }}",
      "<s>", "</s>");
  nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(t->render(msgs, nullptr, true, {{"flag", 1}}), "<s><user>hi[no tools]<assistant>1");
  EXPECT_EQ(t->render(msgs, nullptr, false), "<s><user>hi[no tools]");
}

}  // namespace
}  // namespace mx::jinja
