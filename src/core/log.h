// Minimal leveled logging to stderr with a timestamp; the server and CLI use
// it for the lines an operator reads (model loaded, listening, errors).
#pragma once
#include <fmt/format.h>

namespace mx::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };
void set_level(Level l);
Level level();
void write(Level l, const std::string& msg);

template <typename... A> void debug(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::Debug) write(Level::Debug, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A> void info(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::Info) write(Level::Info, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A> void warn(fmt::format_string<A...> f, A&&... a) {
  if (level() <= Level::Warn) write(Level::Warn, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A> void error(fmt::format_string<A...> f, A&&... a) {
  write(Level::Error, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace mx::log
