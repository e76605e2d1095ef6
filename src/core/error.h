// Errors that say what is wrong and where. Every layer throws mx::Error; the
// CLI and the HTTP server catch it at their boundary and report the message.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown for input a user gave us (flags, requests, files): maps to exit code 2
// on the CLI and to a 400 on the server.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> f, Args&&... args) {
  throw InvalidArgument(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mx

// Invariant check with a formatted message: MX_CHECK(n > 0, "bad n {}", n).
#define MX_CHECK(cond, ...)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      throw ::mx::Error(::fmt::format("{}:{}: check failed: {}: {}", __FILE__, \
                                      __LINE__, #cond,                         \
                                      ::fmt::format(__VA_ARGS__)));            \
    }                                                                          \
  } while (0)
