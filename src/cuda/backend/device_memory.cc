#include "cuda/backend/device_memory.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace mx::cuda {

void check_cuda(cudaError_t err, const char* op, const char* what) {
  if (err != cudaSuccess) fail("CUDA backend, op {}: {} failed: {}", op, what, cudaGetErrorString(err));
}

DeviceStorage::DeviceStorage(size_t bytes, Kind kind, cudaStream_t stream, const char* op)
    : bytes_(bytes), kind_(kind), stream_(stream) {
  if (!bytes) return;
  void* p = nullptr;
  if (kind == Kind::StreamOrdered) {
    check_cuda(cudaMallocAsync(&p, bytes, stream), op, "cudaMallocAsync");
  } else {
    check_cuda(cudaMalloc(&p, bytes), op, "cudaMalloc");
  }
  ptr_ = static_cast<uint8_t*>(p);
}

DeviceStorage::~DeviceStorage() {
  if (!ptr_) return;
  // Errors cannot propagate from a destructor; a failing free means the
  // context is already broken and the next checked call reports it.
  if (kind_ == Kind::StreamOrdered) {
    cudaFreeAsync(ptr_, stream_);
  } else {
    cudaFree(ptr_);
  }
}

void configure_memory_pool(int device) {
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, device), "init", "cudaDeviceGetDefaultMemPool");
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "init",
             "cudaMemPoolSetAttribute(ReleaseThreshold)");
}

Tensor device_empty(DType dtype, Shape shape, cudaStream_t stream, bool poison) {
  const int64_t n = shape_numel(shape);
  const size_t bytes = size_t(n) * dtype_size(dtype);
  auto storage = std::make_shared<DeviceStorage>(bytes, DeviceStorage::Kind::StreamOrdered, stream, "device_empty");
  if (poison && bytes) check_cuda(cudaMemsetAsync(storage->data(), 0xFF, bytes, stream), "device_empty", "poison");
  return Tensor(std::move(storage), 0, dtype, std::move(shape));
}

Tensor device_persistent(DType dtype, Shape shape, const char* what) {
  const size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<DeviceStorage>(bytes, DeviceStorage::Kind::Persistent, nullptr, what);
  if (bytes) {
    check_cuda(cudaMemset(storage->data(), 0, bytes), what, "cudaMemset");
    // cudaMemset runs on the legacy stream, which does not order against the
    // backends' non-blocking streams: finish it before anyone writes.
    check_cuda(cudaDeviceSynchronize(), what, "cudaDeviceSynchronize");
  }
  return Tensor(std::move(storage), 0, dtype, std::move(shape));
}

void require_not_capturing(cudaStream_t stream, const char* op) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &status), op, "cudaStreamIsCapturing");
  if (status != cudaStreamCaptureStatusNone)
    fail("{}: host data that the step did not prepare cannot be part of a recorded (CUDA graph) step", op);
}

Tensor copy_to_device(const Tensor& host, cudaStream_t stream) {
  MX_CHECK(!on_device(host), "copy_to_device: {} is already on the device", host.describe());
  require_not_capturing(stream, "copy_to_device");
  Tensor d = device_empty(host.dtype(), host.shape(), stream);
  if (host.nbytes())
    check_cuda(cudaMemcpyAsync(d.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream), "copy_to_device",
               "cudaMemcpyAsync");
  return d;
}

Tensor copy_to_host(const Tensor& device, cudaStream_t stream) {
  if (!on_device(device)) return device;
  Tensor h = Tensor::empty(device.dtype(), device.shape());
  if (h.nbytes())
    check_cuda(cudaMemcpyAsync(h.raw(), device.raw(), h.nbytes(), cudaMemcpyDeviceToHost, stream), "copy_to_host",
               "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream), "copy_to_host", "cudaStreamSynchronize");
  return h;
}

}  // namespace mx::cuda
