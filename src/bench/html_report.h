// A self-contained HTML page (inline SVG and CSS, no scripts, no external
// assets) for one benchmark result: the summary table, histograms of TTFT,
// TPOT, ITL and E2EL, and output throughput / requests in flight over time.
// Built from the result JSON alone, so `mxserve bench report` can redo it.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace mx::bench {

// Throws mx::InvalidArgument when the JSON lacks the per-request samples.
std::string render_html_report(const nlohmann::json& result);

}  // namespace mx::bench
