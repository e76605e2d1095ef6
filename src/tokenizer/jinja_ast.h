// The Jinja template tree: expressions and statements, each with its source
// line for error messages.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace mx::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

enum class ExprKind {
  kLiteral,    // value
  kName,       // name
  kList,       // items (tuple: is_tuple)
  kDict,       // pairs
  kAttr,       // object.name
  kSubscript,  // object[index] (items[0])
  kSlice,      // object[a:b:c] (items: start, stop, step; nullptr when omitted)
  kCall,       // object(items..., kwargs...)
  kFilter,     // object | name(items..., kwargs...)
  kTest,       // object is [not] name(items...)
  kUnary,      // op object: "not", "-", "+"
  kBinary,     // object op items[0]
  kCond,       // items[0] if object else items[1] (items[1] may be nullptr)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;                 // kLiteral
  std::string name;            // kName, kAttr, kFilter, kTest; op for kUnary/kBinary
  ExprPtr object;              // operand / callee / left side
  std::vector<ExprPtr> items;  // arguments, elements, right side
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::pair<ExprPtr, ExprPtr>> pairs;  // kDict
  bool is_tuple = false;
  bool negated = false;        // kTest: "is not"
};

struct Stmt;
using StmtPtr = std::shared_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kFilterBlock, kScope };

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                // kText
  ExprPtr expr;                    // kOutput, kFor iterable, kSet value
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body); else has nullptr condition
  std::vector<std::string> targets;  // kFor loop variables, kSet/kSetBlock names, kMacro name
  std::string attr;                // kSet: ns.attr target when not empty (targets[0] = ns)
  ExprPtr condition;               // kFor: "if" filter
  Body body;                       // kFor, kSetBlock, kMacro, kFilterBlock, kScope
  Body else_body;                  // kFor
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be nullptr)
  ExprPtr filter;                  // kFilterBlock / kSetBlock filter: a kFilter whose object is nullptr
};

// Parses template source into statements. Throws InvalidArgument
// ("chat template line N: ...") naming any construct it does not support.
Body parse_template(const std::string& source);

}  // namespace mx::jinja
