// libFuzzer harness: the GGUF reader on arbitrary bytes. GgufFile maps a
// path, so each input is written to a file in /dev/shm (RAM) first. A file
// that opens is then walked the way loaders walk it: every key read with its
// typed getters, every tensor's bytes touched, and the tokenizer metadata
// read. Only mx::InvalidArgument may come out.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/gguf_tokenizer.h"

namespace {

std::filesystem::path scratch_file() {
  const char* dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
  return std::filesystem::path(dir) / ("mxserve-fuzz-" + std::to_string(getpid()) + ".gguf");
}

template <typename F>
void tolerate_invalid(F&& f) {
  try {
    f();
  } catch (const mx::InvalidArgument&) {
  }
}

void walk(const mx::GgufFile& file) {
  for (const auto& key : file.keys()) {
    tolerate_invalid([&] { file.get_int(key); });
    tolerate_invalid([&] { file.get_float(key); });
    tolerate_invalid([&] { file.get_string(key); });
    tolerate_invalid([&] { file.get_strings(key); });
    tolerate_invalid([&] { file.get_ints(key); });
  }
  uint64_t sum = 0;
  for (const auto& t : file.tensors()) {
    const uint8_t* bytes = file.data(t);
    if (t.nbytes) sum += bytes[0] + bytes[t.nbytes - 1];  // both ends must be mapped
    (void)t.shape();
  }
  tolerate_invalid([&] { mx::read_gguf_vocab(file); });
  if (sum == 1u << 31) std::fputc(' ', stderr);  // keeps the reads
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path = scratch_file();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  tolerate_invalid([&] { walk(*mx::GgufFile::open(path)); });
  return 0;
}
