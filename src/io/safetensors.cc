#include "io/safetensors.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mx {

namespace {

using json = nlohmann::json;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Shape parse_shape(const json& j, const std::string& where) {
  if (!j.is_array()) fail_input("{}: 'shape' is not an array", where);
  Shape shape;
  for (const auto& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      fail_input("{}: shape {} has a dimension that is not a non-negative integer", where, j.dump());
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

// Element count with overflow detection (a lying header can claim 2^70 elements).
uint64_t checked_numel(const Shape& shape, const std::string& where) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > UINT64_MAX / uint64_t(d)) fail_input("{}: shape {} overflows", where, shape_str(shape));
    n *= uint64_t(d);
  }
  return n;
}

// Bytes the header's dtype and shape imply. F4 stores two elements per byte;
// the Tensor then sees E2M1x2 with the last dimension halved.
uint64_t expected_bytes(DType dtype, Shape& shape, const std::string& where) {
  uint64_t n = checked_numel(shape, where);
  if (dtype == DType::E2M1x2) {
    if (shape.empty() || shape.back() % 2 != 0)
      fail_input("{}: F4 tensor with shape {} needs an even last dimension", where, shape_str(shape));
    shape.back() /= 2;
    return n / 2;
  }
  uint64_t size = dtype_size(dtype);
  if (n > UINT64_MAX / size) fail_input("{}: shape {} overflows", where, shape_str(shape));
  return n * size;
}

SafetensorsEntry parse_entry(const std::string& name, const json& j, uint64_t data_start, uint64_t data_size,
                             const std::string& origin) {
  std::string where = fmt::format("{}: tensor '{}'", origin, name);
  if (!j.is_object()) fail_input("{}: header entry is not an object", where);
  if (!j.contains("dtype") || !j["dtype"].is_string()) fail_input("{}: missing or non-string 'dtype'", where);
  if (!j.contains("shape")) fail_input("{}: missing 'shape'", where);
  if (!j.contains("data_offsets")) fail_input("{}: missing 'data_offsets'", where);
  SafetensorsEntry e;
  try {
    e.dtype = dtype_from_safetensors(j["dtype"].get<std::string>());
  } catch (const Error& err) {
    fail_input("{}: {}", where, err.what());
  }
  e.shape = parse_shape(j["shape"], where);
  const json& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail_input("{}: 'data_offsets' must be two non-negative integers, got {}", where, off.dump());
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end) fail_input("{}: data_offsets [{}, {}] are reversed", where, begin, end);
  if (end > data_size)
    fail_input("{}: data_offsets [{}, {}] run past the data section of {} bytes (file truncated or header lies)",
               where, begin, end, data_size);
  uint64_t want = expected_bytes(e.dtype, e.shape, where);
  if (end - begin != want)
    fail_input("{}: {} x {} needs {} bytes but data_offsets [{}, {}] hold {}", where, j["dtype"].get<std::string>(),
               j["shape"].dump(), want, begin, end, end - begin);
  e.begin = size_t(data_start + begin);
  e.end = size_t(data_start + end);
  return e;
}

void check_no_overlap(const std::map<std::string, SafetensorsEntry>& entries, const std::string& origin) {
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : entries)
    if (e.end > e.begin) order.emplace_back(&name, &e);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].second->begin < order[i - 1].second->end)
      fail_input("{}: tensors '{}' and '{}' overlap in the data section", origin, *order[i - 1].first,
                 *order[i].first);
  }
}

}  // namespace

std::map<std::string, SafetensorsEntry> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                                 const std::string& origin) {
  if (size < 8) fail_input("{}: {} bytes is too short for a safetensors file (truncated?)", origin, size);
  uint64_t header_len = read_u64_le(bytes);
  if (header_len > kMaxSafetensorsHeader)
    fail_input("{}: header length {} exceeds the {} byte limit (corrupt file?)", origin, header_len,
               kMaxSafetensorsHeader);
  if (header_len > size - 8)
    fail_input("{}: header length {} runs past the end of the {} byte file (truncated?)", origin, header_len, size);
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail_input("{}: header is not valid JSON", origin);
  if (!header.is_object()) fail_input("{}: header JSON is not an object", origin);
  uint64_t data_start = 8 + header_len;
  std::map<std::string, SafetensorsEntry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") continue;
    entries.emplace(name, parse_entry(name, value, data_start, size - data_start, origin));
  }
  check_no_overlap(entries, origin);
  return entries;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : file_(std::make_shared<MappedFile>(path)),
      entries_(parse_safetensors_header(file_->data(), file_->size(), file_->path())) {}

Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail("{}: no tensor '{}'", path(), name);
  return Tensor(file_, it->second.begin, it->second.dtype, it->second.shape);
}

}  // namespace mx
