// The result rows and run state shared by mxfp4_bench's parts (bench_rows.h).
#include "bench_rows.h"

#include <cmath>
#include <cstring>
#include <string>

#include "timing.h"

namespace mxbench {

std::vector<Row> g_rows;
std::FILE* g_json = nullptr;
bool g_decode = false;
bool g_dense = false;
bool g_dense_small = false;
const char* g_moe_only = nullptr;
double g_copy_gbps = 0;
uint64_t g_seed = 0;

bool moe_row_selected(const char* label) {
  if (!g_moe_only) return true;
  const std::string only = g_moe_only;
  for (size_t b = 0, e; b <= only.size(); b = e + 1) {
    e = only.find('|', b);
    if (e == std::string::npos) e = only.size();
    const std::string piece = only.substr(b, e - b);
    // "=LABEL": that label exactly (so that "=auto" leaves out the "(auto before ...)" rows).
    if (piece.size() > 1 && piece[0] == '=' ? piece.compare(1, std::string::npos, label) == 0
                                            : !piece.empty() && std::strstr(label, piece.c_str()))
      return true;
  }
  return false;
}

namespace {

// A JSON string literal of `text` (quotes, backslashes and control characters escaped).
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

void emit(const Row& r) {
  g_rows.push_back(r);
  Row& row = g_rows.back();
  if (row.us > 0) {
    const ClockReading c = clock_during(row.windows.empty() ? std::vector<ClockWindow>{last_timed_window()} : row.windows);
    row.sm_mhz = c.sm_mhz, row.power_w = c.power_w, row.capped = c.capped, row.clock_samples = c.samples;
  }
  char nums[512];
  std::snprintf(nums, sizeof nums,
                "\"M\":%d,\"us\":%.3f,\"floor_us\":%.3f,\"ratio\":%.3f,\"rel_err\":%.3g,\"unwritten\":%ld,"
                "\"touched\":%.1f,\"sm_mhz\":%.0f,\"power_w\":%.0f,\"power_capped\":%.2f,\"clock_samples\":%d,"
                "\"err_bound\":%.3g,",
                row.M, row.us, row.floor_us, row.floor_us > 0 ? row.us / row.floor_us : 0.0,
                // JSON has no inf / NaN: a non-finite error is written as -1, which
                // report.py's check (0 <= rel_err <= bound) still fails.
                std::isfinite(row.rel_err) ? row.rel_err : -1.0,
                row.nan_count, row.extra, row.sm_mhz, row.power_w, row.capped, row.clock_samples, row.err_bound);
  const std::string line = "{\"kernel\":" + json_string(row.kernel) + ",\"shape\":" + json_string(row.shape) +
                           ",\"mode\":" + json_string(row.mode) + "," + nums + "\"note\":" +
                           json_string(row.note) + "}";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (g_json) std::fprintf(g_json, "%s\n", line.c_str()), std::fflush(g_json);
}

double floor_us(double bytes) { return bytes / (g_copy_gbps * 1e3); }

uint64_t next_seed() { return g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull; }

}  // namespace mxbench
