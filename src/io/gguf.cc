#include "io/gguf.h"

#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/mapped_file.h"

namespace mx {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
// Limits far above any real checkpoint; they turn a corrupted count into a
// clear error instead of a huge allocation.
constexpr uint64_t kMaxTensors = 1u << 22;
constexpr uint64_t kMaxKv = 1u << 20;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayNesting = 3;

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file) : p_(data), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    if (n > remaining()) fail_input("{}: {} length {} at byte {} runs past the end of the file ({} bytes)", file_, what, n, pos_ - 8, size_);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }
  void need(size_t n, const char* what) const {
    if (n > remaining()) fail_input("{}: truncated: {} needs {} bytes at byte {}, file has {}", file_, what, n, pos_, size_);
  }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
};

// Bytes one element of a scalar metadata type takes (0 for string/array).
size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

bool known_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

nlohmann::json read_scalar(Cursor& c, GgufType t) {
  switch (t) {
    case GgufType::U8: return c.read<uint8_t>("u8 value");
    case GgufType::I8: return c.read<int8_t>("i8 value");
    case GgufType::U16: return c.read<uint16_t>("u16 value");
    case GgufType::I16: return c.read<int16_t>("i16 value");
    case GgufType::U32: return c.read<uint32_t>("u32 value");
    case GgufType::I32: return c.read<int32_t>("i32 value");
    case GgufType::F32: return c.read<float>("f32 value");
    case GgufType::BOOL: return c.read<uint8_t>("bool value") != 0;
    case GgufType::U64: return c.read<uint64_t>("u64 value");
    case GgufType::I64: return c.read<int64_t>("i64 value");
    case GgufType::F64: return c.read<double>("f64 value");
    case GgufType::STRING: return c.read_string("string value");
    default: break;
  }
  throw Error("unreachable metadata type");
}

nlohmann::json read_value(Cursor& c, GgufType t, const std::string& key, const std::string& file, int depth,
                          GgufType* array_type) {
  if (t != GgufType::ARRAY) return read_scalar(c, t);
  if (depth >= kMaxArrayNesting) fail_input("{}: metadata key '{}': arrays nested deeper than {}", file, key, kMaxArrayNesting);
  uint32_t et = c.read<uint32_t>("array element type");
  if (!known_type(et)) fail_input("{}: metadata key '{}': unknown array element type {}", file, key, et);
  uint64_t n = c.read<uint64_t>("array length");
  // Every element takes at least one byte (strings and arrays at least 8), so
  // a count beyond the remaining bytes is a corrupted length, not a big array.
  size_t min_elem = scalar_size(GgufType(et)) ? scalar_size(GgufType(et)) : 8;
  if (n > c.remaining() / min_elem)
    fail_input("{}: metadata key '{}': array of {} elements cannot fit in the {} bytes left", file, key, n, c.remaining());
  if (array_type) *array_type = GgufType(et);
  nlohmann::json arr = nlohmann::json::array();
  arr.get_ref<nlohmann::json::array_t&>().reserve(size_t(n));
  for (uint64_t i = 0; i < n; ++i) arr.push_back(read_value(c, GgufType(et), key, file, depth + 1, nullptr));
  return arr;
}

struct TypeTraits {
  int64_t block = 0;     // elements per block
  uint64_t bytes = 0;    // bytes per block
};

std::optional<TypeTraits> supported_type(uint32_t t) {
  switch (GgmlType(t)) {
    case GgmlType::F32: return TypeTraits{1, 4};
    case GgmlType::F16: return TypeTraits{1, 2};
    case GgmlType::BF16: return TypeTraits{1, 2};
    case GgmlType::Q4_0: return TypeTraits{32, 18};
    case GgmlType::Q4_1: return TypeTraits{32, 20};
    case GgmlType::Q8_0: return TypeTraits{32, 34};
    case GgmlType::MXFP4: return TypeTraits{32, 17};
  }
  return std::nullopt;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::string ggml_type_name(uint32_t type) {
  static const char* kNames[] = {"F32",  "F16",  "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1",
                                 "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
                                 "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                 "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", "Q4_0_4_4",
                                 "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8",
                                 "MXFP4"};
  if (type < std::size(kNames)) return fmt::format("{} ({})", kNames[type], type);
  return fmt::format("unknown type {}", type);
}

std::shared_ptr<const GgufFile> GgufFile::open(const std::filesystem::path& path) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail_input("GGUF file {} does not exist or is not a regular file", path.string());
  f->mapping_ = std::make_shared<MappedFile>(path);
  f->parse();
  return f;
}

void GgufFile::parse() {
  const std::string file = path_.string();
  Cursor c(mapping_->data(), mapping_->size(), file);
  if (mapping_->size() < 4 || c.read<uint32_t>("magic") != kMagic)
    fail_input("{} is not a GGUF file (bad magic; expected the bytes 'GGUF')", file);
  version_ = c.read<uint32_t>("version");
  if (version_ != 3) fail_input("{}: GGUF version {} is not supported (only version 3)", file, version_);
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > kMaxTensors) fail_input("{}: absurd tensor count {} (limit {})", file, n_tensors, kMaxTensors);
  if (n_kv > kMaxKv) fail_input("{}: absurd metadata count {} (limit {})", file, n_kv, kMaxKv);

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    uint32_t t = c.read<uint32_t>("metadata type");
    if (!known_type(t)) fail_input("{}: metadata key '{}' has unknown value type {}", file, key, t);
    GgufKv kv;
    kv.type = GgufType(t);
    kv.value = read_value(c, GgufType(t), key, file, 0, &kv.array_type);
    if (kv_.count(key)) fail_input("{}: metadata key '{}' appears twice", file, key);
    key_order_.push_back(key);
    kv_.emplace(std::move(key), std::move(kv));
  }

  if (const GgufKv* a = find("general.alignment")) {
    if (!a->value.is_number_unsigned() && !a->value.is_number_integer())
      fail_input("{}: general.alignment must be an integer", file);
    int64_t v = a->value.get<int64_t>();
    if (v <= 0 || (v & (v - 1)) != 0 || v > (1 << 20))
      fail_input("{}: general.alignment {} is not a power of two in [1, 2^20]", file, v);
    alignment_ = uint64_t(v);
  }

  tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo info;
    info.name = c.read_string("tensor name");
    uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail_input("{}: tensor '{}' has {} dimensions (expected 1 to {})", file, info.name, n_dims, kMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = c.read<uint64_t>("tensor dimension");
      if (ne == 0 || ne > (uint64_t(1) << 40) || numel > (uint64_t(1) << 48) / ne)
        fail_input("{}: tensor '{}' has an absurd dimension {} (ne[{}])", file, info.name, ne, d);
      numel *= ne;
      info.ne.push_back(int64_t(ne));
    }
    info.type = c.read<uint32_t>("tensor type");
    info.offset = c.read<uint64_t>("tensor offset");
    auto traits = supported_type(info.type);
    if (!traits)
      fail_input("{}: tensor '{}' has tensor type {} which this engine does not read "
                 "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, MXFP4)", file, info.name, ggml_type_name(info.type));
    if (info.ne[0] % traits->block != 0)
      fail_input("{}: tensor '{}': row length {} is not a multiple of the {} block size {}", file, info.name,
                 info.ne[0], ggml_type_name(info.type), traits->block);
    info.nbytes = numel / uint64_t(traits->block) * traits->bytes;
    if (info.offset % alignment_ != 0)
      fail_input("{}: tensor '{}' offset {} is not a multiple of the alignment {}", file, info.name, info.offset, alignment_);
    if (tensor_index_.count(info.name)) fail_input("{}: tensor '{}' appears twice", file, info.name);
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  data_offset_ = align_up(c.pos(), alignment_);
  uint64_t data_size = mapping_->size() >= data_offset_ ? mapping_->size() - data_offset_ : 0;
  for (const auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail_input("{}: tensor '{}' ({} bytes at data offset {}) lies outside the file's {}-byte data section "
                 "(file truncated or offset corrupt)", file, t.name, t.nbytes, t.offset, data_size);
  }
}

const GgufKv* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
const GgufKv& require(const GgufFile& f, const std::string& key) {
  const GgufKv* kv = f.find(key);
  if (!kv) fail_input("{}: metadata key '{}' is missing", f.path().string(), key);
  return *kv;
}
[[noreturn]] void wrong_type(const GgufFile& f, const std::string& key, const char* want) {
  fail_input("{}: metadata key '{}' is not {}", f.path().string(), key, want);
}
}  // namespace

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufKv& kv = require(*this, key);
  if (!kv.value.is_number_integer()) wrong_type(*this, key, "an integer");
  if (kv.value.is_number_unsigned() && kv.value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    wrong_type(*this, key, "an integer below 2^63");
  return kv.value.get<int64_t>();
}
int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}
double GgufFile::get_float(const std::string& key) const {
  const GgufKv& kv = require(*this, key);
  if (!kv.value.is_number()) wrong_type(*this, key, "a number");
  return kv.value.get<double>();
}
double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  const GgufKv* kv = find(key);
  if (!kv) return fallback;
  if (!kv->value.is_boolean()) wrong_type(*this, key, "a bool");
  return kv->value.get<bool>();
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufKv& kv = require(*this, key);
  if (!kv.value.is_string()) wrong_type(*this, key, "a string");
  return kv.value.get<std::string>();
}
std::string GgufFile::get_string_or(const std::string& key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}
std::vector<std::string> GgufFile::get_strings(const std::string& key) const {
  const GgufKv& kv = require(*this, key);
  if (kv.type != GgufType::ARRAY || kv.array_type != GgufType::STRING) wrong_type(*this, key, "an array of strings");
  std::vector<std::string> out;
  out.reserve(kv.value.size());
  for (const auto& v : kv.value) out.push_back(v.get<std::string>());
  return out;
}
std::vector<int64_t> GgufFile::get_ints(const std::string& key) const {
  const GgufKv& kv = require(*this, key);
  if (kv.type != GgufType::ARRAY || !scalar_size(kv.array_type) || kv.array_type == GgufType::F32 ||
      kv.array_type == GgufType::F64 || kv.array_type == GgufType::BOOL)
    wrong_type(*this, key, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(kv.value.size());
  for (const auto& v : kv.value) out.push_back(v.get<int64_t>());
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* GgufFile::data(const GgufTensorInfo& info) const {
  return mapping_->data() + data_offset_ + info.offset;
}

Tensor GgufFile::raw_bytes(const GgufTensorInfo& info) const {
  return Tensor(mapping_, size_t(data_offset_ + info.offset), DType::U8, {int64_t(info.nbytes)});
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace mx
