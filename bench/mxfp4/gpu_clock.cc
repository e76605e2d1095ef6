#include "gpu_clock.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "timing.h"

namespace mxbench {

namespace {

// The few NVML entry points used, declared here (nvml.h is not installed on
// the build machine; the library comes with the driver).
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlByBusId = int (*)(const char*, NvmlDevice*);
using NvmlClock = int (*)(NvmlDevice, int, unsigned*);
using NvmlPower = int (*)(NvmlDevice, unsigned*);
using NvmlReasons = int (*)(NvmlDevice, unsigned long long*);
constexpr int kNvmlClockSm = 1;
constexpr unsigned long long kSwPowerCap = 0x4;

struct Sample {
  SteadyTime at;
  unsigned sm_mhz, power_mw;
  bool capped;
};

struct Sampler {
  std::mutex mutex;
  std::vector<Sample> samples;
  std::atomic<bool> running{false};
  std::thread thread;
  // The bench's early returns and error paths end the program without
  // stop_clock_sampler: a joinable thread destroyed at exit would abort it.
  ~Sampler() {
    running = false;
    if (thread.joinable()) thread.join();
  }
};

Sampler& sampler() {
  static Sampler s;
  return s;
}

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

void start_clock_sampler(int device) {
  Sampler& s = sampler();
  if (s.running.load()) return;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "gpu_clock: no libnvidia-ml.so.1, rows report no clock\n");
    return;
  }
  auto init = symbol<NvmlInit>(lib, "nvmlInit_v2");
  auto by_bus = symbol<NvmlByBusId>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  auto clock = symbol<NvmlClock>(lib, "nvmlDeviceGetClockInfo");
  auto power = symbol<NvmlPower>(lib, "nvmlDeviceGetPowerUsage");
  auto reasons = symbol<NvmlReasons>(lib, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!reasons) reasons = symbol<NvmlReasons>(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  char bus[32] = {};
  NvmlDevice dev = nullptr;
  if (!init || !by_bus || !clock || !power || init() != 0 || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != 0 ||
      by_bus(bus, &dev) != 0) {
    std::fprintf(stderr, "gpu_clock: NVML unusable for device %d, rows report no clock\n", device);
    return;
  }
  s.running = true;
  s.thread = std::thread([&s, dev, clock, power, reasons] {
    while (s.running.load()) {
      const SteadyTime before = std::chrono::steady_clock::now();
      Sample x{before, 0, 0, false};
      unsigned long long r = 0;
      const bool ok = clock(dev, kNvmlClockSm, &x.sm_mhz) == 0 && power(dev, &x.power_mw) == 0;
      if (reasons && reasons(dev, &r) == 0) x.capped = (r & kSwPowerCap) != 0;
      x.at = before + (std::chrono::steady_clock::now() - before) / 2;  // the queries take tens of us
      if (ok) {  // a failed query is no sample (not a zero in the medians)
        std::lock_guard<std::mutex> lock(s.mutex);
        s.samples.push_back(x);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
}

void stop_clock_sampler() {
  Sampler& s = sampler();
  s.running = false;
  if (s.thread.joinable()) s.thread.join();
}

ClockReading clock_during(const std::vector<ClockWindow>& windows) {
  Sampler& s = sampler();
  std::vector<unsigned> mhz, mw;
  int capped = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (const ClockWindow& w : windows)  // samples are in time order
      for (auto x = std::lower_bound(s.samples.begin(), s.samples.end(), w.begin,
                                     [](const Sample& a, SteadyTime t) { return a.at < t; });
           x != s.samples.end() && x->at <= w.end; ++x)
        mhz.push_back(x->sm_mhz), mw.push_back(x->power_mw), capped += x->capped;
  }
  ClockReading r;
  r.samples = int(mhz.size());
  if (mhz.empty()) return r;
  r.sm_mhz = median_of(mhz);
  r.power_w = median_of(mw) / 1000.0;
  r.capped = double(capped) / double(r.samples);
  return r;
}

}  // namespace mxbench
