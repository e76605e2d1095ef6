// Builds small GGUF v3 files byte by byte for the reader's tests, so each test
// states exactly which bytes the reader sees (including broken ones).
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mx::testing {

class GgufBuilder {
 public:
  struct TensorSpec {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string data;
    uint64_t offset_override = UINT64_MAX;
  };

  uint32_t version = 3;
  uint32_t magic = 0x46554747;
  uint64_t alignment = 32;
  std::string kv_bytes;
  uint64_t n_kv = 0;
  std::vector<TensorSpec> tensors;

  static void put_u32(std::string& b, uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); }
  static void put_u64(std::string& b, uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }
  static void put_str(std::string& b, const std::string& s) {
    put_u64(b, s.size());
    b += s;
  }

  // A key with a raw value (type id + encoded bytes), for any metadata type.
  void kv_raw(const std::string& key, uint32_t type, const std::string& value_bytes) {
    put_str(kv_bytes, key);
    put_u32(kv_bytes, type);
    kv_bytes += value_bytes;
    ++n_kv;
  }
  void kv_u32(const std::string& key, uint32_t v) {
    std::string b;
    put_u32(b, v);
    kv_raw(key, 4, b);
  }
  void kv_f32(const std::string& key, float v) {
    std::string b(reinterpret_cast<const char*>(&v), 4);
    kv_raw(key, 6, b);
  }
  void kv_str(const std::string& key, const std::string& v) {
    std::string b;
    put_str(b, v);
    kv_raw(key, 8, b);
  }
  void kv_strs(const std::string& key, const std::vector<std::string>& v) {
    std::string b;
    put_u32(b, 8);
    put_u64(b, v.size());
    for (const auto& s : v) put_str(b, s);
    kv_raw(key, 9, b);
  }
  void kv_i32s(const std::string& key, const std::vector<int32_t>& v) {
    std::string b;
    put_u32(b, 5);
    put_u64(b, v.size());
    for (int32_t x : v) b.append(reinterpret_cast<const char*>(&x), 4);
    kv_raw(key, 9, b);
  }

  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::string data) {
    tensors.push_back({name, std::move(ne), type, std::move(data)});
  }

  std::string bytes() const {
    std::string b;
    put_u32(b, magic);
    put_u32(b, version);
    put_u64(b, tensors.size());
    put_u64(b, n_kv);
    b += kv_bytes;
    std::vector<uint64_t> offsets;
    uint64_t off = 0;
    for (const auto& t : tensors) {
      offsets.push_back(off);
      off = (off + t.data.size() + alignment - 1) / alignment * alignment;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      put_str(b, t.name);
      put_u32(b, uint32_t(t.ne.size()));
      for (uint64_t d : t.ne) put_u64(b, d);
      put_u32(b, t.type);
      put_u64(b, t.offset_override != UINT64_MAX ? t.offset_override : offsets[i]);
    }
    b.resize((b.size() + alignment - 1) / alignment * alignment, '\0');
    for (size_t i = 0; i < tensors.size(); ++i) {
      b += tensors[i].data;
      b.resize((b.size() + alignment - 1) / alignment * alignment, '\0');
    }
    return b;
  }

  std::filesystem::path write(const std::string& file_name) const { return write_bytes(file_name, bytes()); }

  static std::filesystem::path write_bytes(const std::string& file_name, const std::string& b) {
    auto dir = std::filesystem::temp_directory_path() / "mx_gguf_test";
    std::filesystem::create_directories(dir);
    auto path = dir / file_name;
    std::ofstream(path, std::ios::binary).write(b.data(), std::streamsize(b.size()));
    return path;
  }
};

inline std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
inline std::string u16_bytes(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2);
}

}  // namespace mx::testing
