#include "quant/quant_spec.h"

#include "core/error.h"
#include "core/log.h"

namespace mx {

namespace {

using json = nlohmann::json;

std::string str_or(const json& j, const char* key, const std::string& fallback) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// "weight" / "input_tensors" entries of Quark's global_quant_config: only the
// OCP MXFP4 layout (fp4 values, per-32 groups, E8M0 scales along K) runs here.
void check_quark_fp4(const json& spec, const std::string& where) {
  if (!spec.is_object()) fail_input("{}: expected an object", where);
  std::string dtype = str_or(spec, "dtype", "");
  if (dtype != "fp4")
    fail_input("{}: dtype '{}' is not supported (only fp4, OCP MXFP4)", where, dtype);
  std::string qscheme = str_or(spec, "qscheme", "per_group");
  if (qscheme != "per_group") fail_input("{}: qscheme '{}' is not supported (only per_group)", where, qscheme);
  if (!spec.contains("group_size") || !spec["group_size"].is_number_integer() || spec["group_size"].get<int>() != 32)
    fail_input("{}: group_size {} is not supported (MXFP4 needs 32)", where,
               spec.contains("group_size") ? spec["group_size"].dump() : "missing");
  std::string scale_format = str_or(spec, "scale_format", "");
  if (scale_format != "e8m0")
    fail_input("{}: scale_format '{}' is not supported (MXFP4 needs e8m0)", where, scale_format);
  if (spec.contains("ch_axis") && spec["ch_axis"].is_number_integer() && spec["ch_axis"].get<int>() != -1)
    fail_input("{}: ch_axis {} is not supported (groups run along the last axis, -1)", where, spec["ch_axis"].dump());
}

std::vector<NamePattern> parse_patterns(const json& list, const std::string& where) {
  std::vector<NamePattern> out;
  if (list.is_null()) return out;
  if (!list.is_array()) fail_input("{}: expected a list of names", where);
  for (const auto& e : list) {
    if (!e.is_string()) fail_input("{}: entry {} is not a string", where, e.dump());
    out.emplace_back(e.get<std::string>());
  }
  return out;
}

bool non_empty(const json& j, const char* key) {
  return j.contains(key) && !j[key].is_null() && !j[key].empty();
}

QuantSpec parse_quark(const json& qc, const std::string& origin) {
  std::string where = origin + ": quantization_config";
  QuantSpec spec{QuantMethod::QuarkMxfp4, 32, false, {}};
  if (!qc.contains("global_quant_config") || !qc["global_quant_config"].is_object())
    fail_input("{}: quark config without a 'global_quant_config' object", where);
  const json& g = qc["global_quant_config"];
  if (!g.contains("weight")) fail_input("{}.global_quant_config: missing 'weight'", where);
  check_quark_fp4(g["weight"], where + ".global_quant_config.weight");
  if (g.contains("input_tensors") && !g["input_tensors"].is_null()) {
    check_quark_fp4(g["input_tensors"], where + ".global_quant_config.input_tensors");
    spec.dynamic_fp4_inputs = true;
    if (!g["input_tensors"].value("is_dynamic", true))
      fail_input("{}.global_quant_config.input_tensors: static activation scales are not supported", where);
  }
  if (g.contains("output_tensors") && !g["output_tensors"].is_null())
    fail_input("{}.global_quant_config: output_tensors quantization is not supported", where);
  for (const char* key : {"layer_quant_config", "layer_type_quant_config"})
    if (non_empty(qc, key))
      fail_input("{}: per-layer overrides in '{}' are not supported (only global_quant_config)", where, key);
  if (non_empty(qc, "kv_cache_quant_config")) log::warn("{}: kv_cache_quant_config is ignored", where);
  spec.excluded = parse_patterns(qc.value("exclude", json()), where + ".exclude");
  return spec;
}

QuantSpec parse_fp8(const json& qc, const std::string& origin) {
  std::string where = origin + ": quantization_config";
  std::string fmt_name = str_or(qc, "fmt", "e4m3");
  if (fmt_name != "e4m3") fail_input("{}: fp8 fmt '{}' is not supported (only e4m3)", where, fmt_name);
  std::string act = str_or(qc, "activation_scheme", "dynamic");
  if (act != "dynamic") fail_input("{}: activation_scheme '{}' is not supported (only dynamic)", where, act);
  const json bs = qc.value("weight_block_size", json());
  if (bs != json({128, 128}))
    fail_input("{}: weight_block_size {} is not supported (only [128, 128])", where, bs.dump());
  QuantSpec spec{QuantMethod::Fp8Block, 128, false, {}};
  spec.excluded = parse_patterns(qc.value("modules_to_not_convert", json()), where + ".modules_to_not_convert");
  return spec;
}

void check_int4_group(const std::string& name, const json& group, const std::string& where) {
  std::string w = fmt::format("{}.config_groups.{}", where, name);
  if (!group.is_object() || !group.contains("weights") || !group["weights"].is_object())
    fail_input("{}: missing 'weights'", w);
  const json& wt = group["weights"];
  if (wt.value("num_bits", 0) != 4 || str_or(wt, "type", "") != "int" || !wt.value("symmetric", false))
    fail_input("{}.weights: only symmetric 4-bit int is supported, got {}", w, wt.dump());
  if (str_or(wt, "strategy", "") != "group" || wt.value("group_size", 0) != 32)
    fail_input("{}.weights: strategy '{}' group_size {} is not supported (only group, 32)", w, str_or(wt, "strategy", ""),
               wt.contains("group_size") ? wt["group_size"].dump() : "missing");
  if (wt.contains("actorder") && !wt["actorder"].is_null())
    fail_input("{}.weights: actorder {} is not supported", w, wt["actorder"].dump());
  if (group.contains("input_activations") && !group["input_activations"].is_null())
    fail_input("{}: input_activations quantization is not supported (W4A16 only)", w);
}

QuantSpec parse_compressed_tensors(const json& qc, const std::string& origin) {
  std::string where = origin + ": quantization_config";
  std::string format = str_or(qc, "format", "");
  if (format != "pack-quantized")
    fail_input("{}: compressed-tensors format '{}' is not supported (only pack-quantized)", where, format);
  if (!qc.contains("config_groups") || !qc["config_groups"].is_object() || qc["config_groups"].empty())
    fail_input("{}: compressed-tensors config without 'config_groups'", where);
  for (const auto& [name, group] : qc["config_groups"].items()) check_int4_group(name, group, where);
  QuantSpec spec{QuantMethod::CompressedInt4, 32, false, {}};
  spec.excluded = parse_patterns(qc.value("ignore", json()), where + ".ignore");
  return spec;
}

QuantSpec parse_quant_spec_checked(const json& qc, const std::string& origin) {
  if (qc.is_null()) return {};
  if (!qc.is_object()) fail_input("{}: quantization_config must be an object", origin);
  std::string method = str_or(qc, "quant_method", "");
  if (method == "quark") return parse_quark(qc, origin);
  if (method == "fp8") return parse_fp8(qc, origin);
  if (method == "compressed-tensors") return parse_compressed_tensors(qc, origin);
  fail_input("{}: quantization_config.quant_method '{}' is not supported (supported: quark fp4, fp8, "
             "compressed-tensors pack-quantized)",
             origin, method);
}

}  // namespace

std::string_view quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::None: return "none";
    case QuantMethod::QuarkMxfp4: return "quark mxfp4";
    case QuantMethod::Fp8Block: return "fp8 block";
    case QuantMethod::CompressedInt4: return "compressed-tensors int4";
  }
  return "?";
}

NamePattern::NamePattern(const std::string& entry) : text_(entry) {
  if (entry.rfind("re:", 0) == 0) {
    is_regex_ = true;
    try {
      regex_ = std::regex(entry.substr(3), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail_input("exclude pattern '{}' is not a valid regular expression: {}", entry, e.what());
    }
  }
}

bool NamePattern::matches(const std::string& layer) const {
  if (!is_regex_) return layer == text_;
  // Python's re.match: anchored at the start, free at the end.
  return std::regex_search(layer, regex_, std::regex_constants::match_continuous);
}

bool QuantSpec::is_excluded(const std::string& layer, const std::string& prefix) const {
  bool has_prefix = !prefix.empty() && layer.rfind(prefix, 0) == 0;
  std::string bare = has_prefix ? layer.substr(prefix.size()) : layer;
  for (const auto& p : excluded)
    if (p.matches(layer) || (has_prefix && p.matches(bare))) return true;
  return false;
}

QuantSpec parse_quant_spec(const json& qc, const std::string& origin) {
  try {
    return parse_quant_spec_checked(qc, origin);
  } catch (const json::exception& e) {  // a key of the wrong JSON type
    fail_input("{}: malformed quantization_config: {}", origin, e.what());
  }
}

}  // namespace mx
