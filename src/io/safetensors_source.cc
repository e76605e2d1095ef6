// open_safetensors: a TensorSource over one file, a sharded checkpoint
// (model.safetensors.index.json naming a shard per tensor), or a directory of
// shards without an index.
#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tensor_source.h"

namespace mx {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class SafetensorsSource : public TensorSource {
 public:
  // Adds every tensor of `file`; a name already present elsewhere is an error.
  void add_file(std::shared_ptr<SafetensorsFile> file) {
    for (const auto& [name, entry] : file->entries()) {
      auto [it, fresh] = where_.emplace(name, file.get());
      if (!fresh)
        fail_input("tensor '{}' appears in both {} and {}", name, it->second->path(), file->path());
    }
    files_.push_back(std::move(file));
  }
  // Adds the tensors the index assigns to `file`, checking they are there.
  void add_indexed(std::shared_ptr<SafetensorsFile> file, const std::vector<std::string>& names,
                   const std::string& index_path) {
    for (const auto& name : names) {
      if (!file->has(name))
        fail_input("{} places tensor '{}' in {}, but that file has no such tensor", index_path, name, file->path());
      where_.emplace(name, file.get());
    }
    files_.push_back(std::move(file));
  }

  bool has(const std::string& name) const override { return where_.count(name) > 0; }
  Tensor get(const std::string& name) const override {
    auto it = where_.find(name);
    if (it == where_.end()) fail_input("checkpoint {} has no tensor '{}'", origin_, name);
    return it->second->get(name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(where_.size());
    for (const auto& kv : where_) out.push_back(kv.first);
    return out;
  }
  std::string file_of(const std::string& name) const override {
    auto it = where_.find(name);
    return it == where_.end() ? origin_ : it->second->path();
  }
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
  std::string origin_;
};

json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail_input("cannot open {}", path.string());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail_input("{} is not valid JSON", path.string());
  return j;
}

std::unique_ptr<TensorSource> open_index(const fs::path& index_path) {
  json index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail_input("{}: no 'weight_map' object", index_path.string());
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) fail_input("{}: shard of tensor '{}' is not a string", index_path.string(), name);
    by_shard[shard.get<std::string>()].push_back(name);
  }
  auto source = std::make_unique<SafetensorsSource>();
  source->set_origin(index_path.string());
  for (const auto& [shard, names] : by_shard) {
    fs::path shard_path = index_path.parent_path() / shard;
    if (!fs::exists(shard_path))
      fail_input("{} names shard {} (holding '{}'), which does not exist", index_path.string(), shard_path.string(),
                 names.front());
    source->add_indexed(std::make_shared<SafetensorsFile>(shard_path), names, index_path.string());
  }
  return source;
}

std::unique_ptr<TensorSource> open_files(const std::vector<fs::path>& files, const std::string& origin) {
  auto source = std::make_unique<SafetensorsSource>();
  source->set_origin(origin);
  for (const auto& f : files) source->add_file(std::make_shared<SafetensorsFile>(f));
  return source;
}

}  // namespace

std::unique_ptr<TensorSource> open_safetensors(const fs::path& dir_or_file) {
  if (!fs::exists(dir_or_file)) fail_input("checkpoint path {} does not exist", dir_or_file.string());
  if (!fs::is_directory(dir_or_file)) {
    std::string name = dir_or_file.filename().string();
    if (name.size() > 11 && name.ends_with(".index.json")) return open_index(dir_or_file);
    return open_files({dir_or_file}, dir_or_file.string());
  }
  fs::path index = dir_or_file / "model.safetensors.index.json";
  if (fs::exists(index)) return open_index(index);
  fs::path single = dir_or_file / "model.safetensors";
  if (fs::exists(single)) return open_files({single}, single.string());
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(dir_or_file))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") shards.push_back(e.path());
  if (shards.empty()) fail_input("{} holds no model.safetensors, index, or *.safetensors files", dir_or_file.string());
  std::sort(shards.begin(), shards.end());
  return open_files(shards, dir_or_file.string());
}

}  // namespace mx
