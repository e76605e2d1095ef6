// Byte encoding of the messages nodes exchange (node_group.h, the forward
// plans of model/parallel_causal_lm.cc): little-endian PODs, length-prefixed
// strings and vectors. Both ends are the same binary, so the layout is only
// checked for truncation: a short or over-long message is an mx::Error naming it.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace mx::wire {

class Writer {
 public:
  template <typename T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&v);
    bytes_.append(p, sizeof(T));
  }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    bytes_ += s;
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    pod(uint64_t(v.size()));
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class Reader {
 public:
  Reader(const std::string& bytes, const char* what) : bytes_(bytes), what_(what) {}
  template <typename T>
  T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    check(n);
    return std::string(take(size_t(n)), size_t(n));
  }
  template <typename T>
  std::vector<T> vec() {
    const uint64_t n = pod<uint64_t>();
    check(n > (bytes_.size() - pos_) / sizeof(T) ? bytes_.size() + 1 : n * sizeof(T));
    std::vector<T> v(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), take(size_t(n) * sizeof(T)), size_t(n) * sizeof(T));
    return v;
  }
  // Throws unless every byte was read (a message of another layout).
  void finish() const {
    if (pos_ != bytes_.size()) fail("malformed {}: {} bytes left over of {}", what_, bytes_.size() - pos_, bytes_.size());
  }

 private:
  void check(uint64_t n) const {
    if (n > bytes_.size() - pos_) fail("malformed {}: needs {} more bytes, {} left", what_, n, bytes_.size() - pos_);
  }
  const char* take(size_t n) {
    check(n);
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  const std::string& bytes_;
  const char* what_;
  size_t pos_ = 0;
};

}  // namespace mx::wire
