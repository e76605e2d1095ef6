#include "io/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace mx {
namespace {

template <typename T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_string(std::string& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b += s;
}

void put_scalar(std::string& b, GgufType t, const nlohmann::json& v, const std::string& key) {
  switch (t) {
    case GgufType::U8: return put(b, v.get<uint8_t>());
    case GgufType::I8: return put(b, v.get<int8_t>());
    case GgufType::U16: return put(b, v.get<uint16_t>());
    case GgufType::I16: return put(b, v.get<int16_t>());
    case GgufType::U32: return put(b, v.get<uint32_t>());
    case GgufType::I32: return put(b, v.get<int32_t>());
    case GgufType::F32: return put(b, v.get<float>());
    case GgufType::BOOL: return put<uint8_t>(b, v.get<bool>() ? 1 : 0);
    case GgufType::U64: return put(b, v.get<uint64_t>());
    case GgufType::I64: return put(b, v.get<int64_t>());
    case GgufType::F64: return put(b, v.get<double>());
    case GgufType::STRING: return put_string(b, v.get<std::string>());
    case GgufType::ARRAY: break;
  }
  fail("write_gguf_metadata: key '{}': arrays of arrays are not written", key);
}

}  // namespace

void write_gguf_metadata(const std::filesystem::path& out, const GgufFile& src,
                         const std::function<bool(const std::string&)>& keep) {
  std::string body;
  uint64_t n_kv = 0;
  for (const auto& key : src.keys()) {
    if (!keep(key)) continue;
    const GgufKv& kv = *src.find(key);
    put_string(body, key);
    put<uint32_t>(body, uint32_t(kv.type));
    if (kv.type == GgufType::ARRAY) {
      put<uint32_t>(body, uint32_t(kv.array_type));
      put<uint64_t>(body, kv.value.size());
      for (const auto& v : kv.value) put_scalar(body, kv.array_type, v, key);
    } else {
      put_scalar(body, kv.type, kv.value, key);
    }
    ++n_kv;
  }
  std::string head;
  put<uint32_t>(head, 0x46554747);
  put<uint32_t>(head, 3);
  put<uint64_t>(head, 0);
  put<uint64_t>(head, n_kv);
  std::string bytes = head + body;
  bytes.resize((bytes.size() + 31) / 32 * 32, '\0');  // empty, aligned data section
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f.write(bytes.data(), std::streamsize(bytes.size())) || !f.flush())
    fail("cannot write {}: {}", out.string(), std::strerror(errno));
}

GgufChatTemplateSource gguf_chat_template(const GgufFile& file) {
  GgufChatTemplateSource t;
  t.source = file.get_string_or("tokenizer.chat_template", "");
  if (t.source.empty() || !file.find("tokenizer.ggml.tokens")) return t;
  auto tokens = file.get_strings("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    int64_t id = file.get_int_or(key, -1);
    return id >= 0 && id < int64_t(tokens.size()) ? tokens[size_t(id)] : std::string();
  };
  t.bos_token = token("tokenizer.ggml.bos_token_id");
  t.eos_token = token("tokenizer.ggml.eos_token_id");
  return t;
}

}  // namespace mx
