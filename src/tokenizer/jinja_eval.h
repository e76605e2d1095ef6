// Runs a parsed template: statements write to an output string, expressions
// evaluate to Values, with jinja2's scoping (each for-loop iteration and each
// macro call gets its own scope; namespace() objects carry state out).
#pragma once
#include <string>

#include "tokenizer/jinja_ast.h"

namespace mx::jinja {

class Template {
 public:
  explicit Template(const std::string& source);
  // globals: the template's variables (messages, tools, add_generation_prompt, ...).
  std::string render(const Dict& globals) const;

 private:
  Body body_;
};

}  // namespace mx::jinja
