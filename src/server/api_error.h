// Errors the HTTP layer answers with, in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mx {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

// 400 invalid_request_error naming the field at fault.
template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> f, Args&&... args) {
  throw ApiError(400, "invalid_request_error", fmt::format(f, std::forward<Args>(args)...), param);
}

nlohmann::json error_body(int status, const std::string& type, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

}  // namespace mx
