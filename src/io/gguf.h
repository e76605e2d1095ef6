// GGUF v3 files (llama.cpp's single-file checkpoints): header, typed metadata,
// tensor infos and the aligned data section, read from a read-only mapping.
// Every offset and count is validated up front; a malformed file raises
// mx::InvalidArgument naming the file and what is wrong, never reads out of
// bounds.
//
// Layout (little endian): "GGUF" u32 version u64 n_tensors u64 n_kv, then n_kv
// x {string key, u32 type, value}, then n_tensors x {string name, u32 n_dims,
// u64 ne[n_dims] (ne[0] innermost), u32 ggml_type, u64 offset}, then padding to
// general.alignment (default 32), then the data. Strings are u64 length + bytes.
//
// Converting tensors to engine formats and mapping names to the HF Llama layout
// lives in io/gguf_source.h; the block decoders in io/gguf_quants.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace mx {

// Metadata value types (gguf_type).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};

// Tensor element types this engine reads (ggml_type ids). Other ggml types
// (k-quants, i-quants) are recognised by id for messages and refused.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, BF16 = 30, MXFP4 = 39,
};

std::string ggml_type_name(uint32_t type);

struct GgufKv {
  GgufType type = GgufType::U8;
  GgufType array_type = GgufType::U8;  // element type when type == ARRAY
  // Numbers, bools and strings as JSON scalars; arrays as JSON arrays. Strings
  // keep their raw bytes (tokens may be partial UTF-8).
  nlohmann::json value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (contiguous) dimension
  uint32_t type = 0;        // ggml_type id
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;
  // Row-major shape as safetensors/PyTorch write it: reversed ne.
  Shape shape() const { return Shape(ne.rbegin(), ne.rend()); }
};

class GgufFile {
 public:
  // Maps and validates the file. Throws mx::InvalidArgument on anything malformed.
  static std::shared_ptr<const GgufFile> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<std::string>& keys() const { return key_order_; }
  const GgufKv* find(const std::string& key) const;
  // Typed getters; throw mx::InvalidArgument naming the key when it is absent
  // or has another type. The *_or variants return the fallback when absent.
  int64_t get_int(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor's bytes as stored (a view into the mapping, U8 [nbytes]).
  Tensor raw_bytes(const GgufTensorInfo& info) const;
  const uint8_t* data(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  void parse();

  std::filesystem::path path_;
  std::shared_ptr<Storage> mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> key_order_;
  std::unordered_map<std::string, GgufKv> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// True when the path is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& path);

}  // namespace mx
