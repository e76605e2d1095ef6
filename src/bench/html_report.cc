#include "bench/html_report.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "bench/metrics.h"
#include "core/error.h"

namespace mx::bench {
namespace {

using nlohmann::json;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Per-request samples, in seconds, rebuilt from the result JSON.
struct Samples {
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<double> chunk_times;   // absolute (from benchmark start) time of every choices chunk
  std::vector<double> chunk_tokens;  // tokens attributed to that chunk
  std::vector<std::pair<double, double>> spans;  // [send, last chunk] of each successful request
};

Samples collect(const json& r) {
  for (const char* key : {"ttfts", "itls", "start_times", "e2els", "successes", "output_lens"})
    if (!r.contains(key) || !r[key].is_array())
      fail_input("result JSON has no '{}' array: save it with `mxserve bench serve --save-result`", key);
  Samples s;
  const size_t n = r["ttfts"].size();
  for (size_t i = 0; i < n; ++i) {
    if (!r["successes"][i].get<bool>()) continue;
    const double start = r["start_times"][i].get<double>();
    const double ttft = r["ttfts"][i].get<double>();
    const double e2el = r["e2els"][i].get<double>();
    const auto itl = r["itls"][i].get<std::vector<double>>();
    const auto tokens = r["output_lens"][i].get<int64_t>();
    s.ttft.push_back(ttft);
    s.e2el.push_back(e2el);
    s.itl.insert(s.itl.end(), itl.begin(), itl.end());
    if (tokens > 1) s.tpot.push_back((e2el - ttft) / double(tokens - 1));
    // Tokens per chunk are not in the stream; spread the request's tokens
    // evenly over its chunks for the throughput-over-time chart.
    const double per_chunk = double(tokens) / double(itl.size() + 1);
    double t = start + ttft;
    s.chunk_times.push_back(t);
    s.chunk_tokens.push_back(per_chunk);
    for (double gap : itl) {
      t += gap;
      s.chunk_times.push_back(t);
      s.chunk_tokens.push_back(per_chunk);
    }
    s.spans.emplace_back(start, start + e2el);
  }
  return s;
}

constexpr double kW = 560, kH = 260, kLeft = 60, kRight = 15, kTop = 30, kBottom = 45;

std::string axis_frame(const std::string& title, const std::string& x_label, double x_max,
                       const std::string& y_label, double y_max) {
  std::string svg = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}">)~"
      R"~(<text x="{2}" y="18" class="title">{3}</text>)~",
      kW, kH, kLeft, escape(title));
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  svg += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" class="frame"/>)~", kLeft, kTop, pw, ph);
  for (int k = 0; k <= 4; ++k) {
    const double x = kLeft + pw * k / 4, y = kTop + ph - ph * k / 4;
    svg += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="middle">{:.4g}</text>)~", x,
                       kTop + ph + 15, x_max * k / 4);
    svg += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="end">{:.4g}</text>)~",
                       kLeft - 4, y + 4, y_max * k / 4);
  }
  svg += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" class="label" text-anchor="middle">{}</text>)~",
                     kLeft + pw / 2, kH - 8, escape(x_label));
  svg += fmt::format(R"~(<text x="14" y="{:.1f}" class="label" transform="rotate(-90 14 {:.1f})" text-anchor="middle">{}</text>)~",
                     kTop + ph / 2, kTop + ph / 2, escape(y_label));
  return svg;
}

// Histogram of values (seconds) shown in ms, with mean/median/p99 markers.
std::string histogram_svg(const std::string& title, const std::vector<double>& seconds) {
  if (seconds.empty())
    return fmt::format(R"~(<p class="empty">{}: no samples</p>)~", escape(title));
  std::vector<double> ms;
  for (double v : seconds) ms.push_back(v * 1000);
  const double hi = *std::max_element(ms.begin(), ms.end());
  const double x_max = hi > 0 ? hi * 1.05 : 1;
  const int bins = std::clamp(int(std::sqrt(double(ms.size()))) * 2, 5, 60);
  std::vector<int> counts(size_t(bins), 0);
  for (double v : ms) counts[size_t(std::min(bins - 1, int(v / x_max * bins)))]++;
  const int top = *std::max_element(counts.begin(), counts.end());
  std::string svg = axis_frame(title, "ms", x_max, "requests / samples", top);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  for (int b = 0; b < bins; ++b) {
    const double h = ph * counts[size_t(b)] / std::max(top, 1);
    svg += fmt::format(R"~(<rect x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" class="bar"/>)~",
                       kLeft + pw * b / bins, kTop + ph - h, std::max(pw / bins - 1, 0.5), h);
  }
  const std::pair<const char*, double> marks[] = {
      {"mean", mean(ms)}, {"median", percentile(ms, 50)}, {"p99", percentile(ms, 99)}};
  int row = 0;
  for (const auto& [name, v] : marks) {
    const double x = kLeft + pw * v / x_max;
    svg += fmt::format(R"~(<line x1="{0:.2f}" x2="{0:.2f}" y1="{1}" y2="{2}" class="mark {3}"/>)~", x, kTop,
                       kTop + ph, name);
    svg += fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" class="tick {}" text-anchor="end">{} {:.2f} ms</text>)~",
                       kW - kRight - 4, kTop + 14 + 13 * row++, name, name, v);
  }
  return svg + "</svg>";
}

std::string polyline_svg(const std::string& title, const std::string& y_label,
                         const std::vector<double>& xs, const std::vector<double>& ys) {
  if (xs.empty()) return fmt::format(R"~(<p class="empty">{}: no samples</p>)~", escape(title));
  const double x_max = std::max(xs.back(), 1e-9);
  const double y_max = std::max(*std::max_element(ys.begin(), ys.end()) * 1.1, 1e-9);
  std::string svg = axis_frame(title, "seconds since start", x_max, y_label, y_max);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  svg += R"~(<polyline class="line" points=")~";
  for (size_t i = 0; i < xs.size(); ++i)
    svg += fmt::format("{:.2f},{:.2f} ", kLeft + pw * xs[i] / x_max, kTop + ph - ph * ys[i] / y_max);
  return svg + R"~("/></svg>)~";
}

// Output tokens/s and mean requests in flight, in about 60 time buckets.
std::string over_time_svgs(const Samples& s, double duration) {
  if (!(duration > 0)) return "";
  const int buckets = 60;
  const double width = duration / buckets;
  std::vector<double> xs, tokens(buckets, 0.0), in_flight(buckets, 0.0);
  for (size_t i = 0; i < s.chunk_times.size(); ++i)
    tokens[size_t(std::clamp(int(s.chunk_times[i] / width), 0, buckets - 1))] += s.chunk_tokens[i];
  for (const auto& [a, b] : s.spans)
    for (int k = 0; k < buckets; ++k) {
      const double lo = k * width, hi = lo + width;
      in_flight[size_t(k)] += std::max(0.0, std::min(b, hi) - std::max(a, lo)) / width;
    }
  for (int k = 0; k < buckets; ++k) {
    xs.push_back((k + 0.5) * width);
    tokens[size_t(k)] /= width;
  }
  return polyline_svg("Output throughput over time", "tokens/s", xs, tokens) +
         polyline_svg("Requests in flight over time", "requests", xs, in_flight);
}

std::string summary_table(const json& r) {
  std::string rows;
  auto add = [&](const std::string& name, const json& v) {
    std::string text = v.is_number_float() ? fmt::format("{:.2f}", v.get<double>())
                       : v.is_null()       ? "None"
                       : v.is_string()     ? v.get<std::string>()
                                           : v.dump();
    rows += fmt::format("<tr><td>{}</td><td>{}</td></tr>", escape(name), escape(text));
  };
  for (const char* k : {"date", "backend", "model_id", "num_prompts", "request_rate", "burstiness",
                        "max_concurrency", "completed", "failed", "duration", "total_input_tokens",
                        "total_output_tokens", "request_throughput", "output_throughput",
                        "total_token_throughput", "concurrency"})
    if (r.contains(k)) add(k, r[k]);
  for (const auto& [k, v] : r.items())
    if (k.size() > 3 && k.substr(k.size() - 3) == "_ms") add(k, v);
  return "<table>" + rows + "</table>";
}

}  // namespace

std::string render_html_report(const json& result) {
  if (!result.is_object()) fail_input("the benchmark result is not a JSON object");
  const Samples s = collect(result);
  const double duration = result.value("duration", 0.0);
  std::string html = R"~(<!DOCTYPE html><html><head><meta charset="utf-8"><title>mxserve serving benchmark</title><style>
body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin-bottom:20px}
td{border:1px solid #ccc;padding:3px 8px;font-size:13px}td:last-child{text-align:right}
svg{margin:6px;border:1px solid #eee}.title{font-size:14px;font-weight:bold}.tick{font-size:11px;fill:#444}
.label{font-size:12px;fill:#333}.frame{fill:none;stroke:#999}.bar{fill:#4a7bd0}
.line{fill:none;stroke:#d0602a;stroke-width:1.5}.mark{stroke-width:1.5;stroke-dasharray:4 3}
.mean{stroke:#222;fill:#222}.median{stroke:#2a9d4a;fill:#2a9d4a}.p99{stroke:#c02a2a;fill:#c02a2a}
</style></head><body>)~";
  html += fmt::format("<h1>Serving benchmark: {}</h1>", escape(result.value("model_id", std::string())));
  html += summary_table(result);
  html += "<div>";
  html += histogram_svg("TTFT (time to first token)", s.ttft);
  html += histogram_svg("TPOT (time per output token, excl. 1st)", s.tpot);
  html += histogram_svg("ITL (gap between streamed chunks)", s.itl);
  html += histogram_svg("E2EL (end-to-end latency)", s.e2el);
  html += over_time_svgs(s, duration);
  html += "</div><p class=\"tick\">Throughput over time spreads each request's usage token count "
          "evenly over its streamed chunks.</p></body></html>\n";
  return html;
}

}  // namespace mx::bench
