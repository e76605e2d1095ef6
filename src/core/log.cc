#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace mx::log {

namespace {
std::atomic<Level> g_level{Level::Info};
std::mutex g_mu;
constexpr const char* kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
}  // namespace

void set_level(Level l) { g_level = l; }
Level level() { return g_level; }

void write(Level l, const std::string& msg) {
  using namespace std::chrono;
  double t = duration<double>(system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%.3f %s] %s\n", t, kNames[int(l)], msg.c_str());
}

}  // namespace mx::log
