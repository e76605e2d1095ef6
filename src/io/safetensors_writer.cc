#include "io/safetensors_writer.h"

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mx {

namespace {

using json = nlohmann::json;

// The shape safetensors records: F4 counts elements, two per stored byte.
json header_shape(const Tensor& t) {
  Shape s = t.shape();
  if (t.dtype() == DType::E2M1x2 && !s.empty()) s.back() *= 2;
  return json(s);
}

std::string build_header(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  // nlohmann's object sorts keys; offsets follow the caller's order anyway.
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!seen.insert(name).second) fail("write_safetensors: duplicate tensor name '{}'", name);
    MX_CHECK(t.device() == Device::CPU, "tensor '{}' is not on the CPU", name);
    header[name] = {{"dtype", std::string(dtype_to_safetensors(t.dtype()))},
                    {"shape", header_shape(t)},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header = build_header(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot create {}", path.string());
  uint8_t len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), std::streamsize(header.size()));
  for (const auto& [name, t] : tensors) out.write(reinterpret_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
  out.close();
  if (!out) fail("error writing {}", path.string());
}

std::vector<std::filesystem::path> write_safetensors_sharded(const std::filesystem::path& dir,
                                                             const NamedTensors& tensors, size_t max_shard_bytes) {
  std::vector<NamedTensors> shards(1);
  size_t bytes = 0;
  for (const auto& nt : tensors) {
    if (bytes > 0 && bytes + nt.second.nbytes() > max_shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(nt);
    bytes += nt.second.nbytes();
  }
  json weight_map = json::object();
  size_t total = 0;
  std::vector<std::filesystem::path> paths;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    paths.push_back(dir / file);
    write_safetensors(paths.back(), shards[i]);
    for (const auto& [name, t] : shards[i]) {
      weight_map[name] = file;
      total += t.nbytes();
    }
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  std::ofstream out(dir / "model.safetensors.index.json");
  out << index.dump(2) << "\n";
  if (!out) fail("error writing {}", (dir / "model.safetensors.index.json").string());
  return paths;
}

}  // namespace mx
