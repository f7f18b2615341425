// The CPU backend: the arena is 256-byte aligned host memory, constants are used in place (the
// kernels read the mmapped file or the graph's own storage), inputs and outputs are memcpy'd straight
// into and out of the arena, work is synchronous (nothing to capture) and nodes are timed with
// std::chrono::steady_clock. Also which kernels OpenBLAS picked (infer/openblas.h).
#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <cblas.h>

#include "engine/src/backend.h"
#include "infer/openblas.h"
#include "infer/error.h"
#include "engine/src/planner.h"

namespace infer::detail {
namespace {

class CpuBuffer final : public DeviceBuffer {
 public:
  explicit CpuBuffer(uint64_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    if (bytes > static_cast<uint64_t>(std::numeric_limits<size_t>::max()))
      throw Error("cpu backend: cannot allocate " + std::to_string(bytes) + " bytes");
    data_ = ::operator new(static_cast<size_t>(bytes), std::align_val_t(kArenaAlignment),
                           std::nothrow);
    if (!data_)
      throw Error("cpu backend: out of memory allocating " + std::to_string(bytes) + " bytes");
  }
  ~CpuBuffer() override {
    if (data_) ::operator delete(data_, std::align_val_t(kArenaAlignment));
  }
  CpuBuffer(const CpuBuffer&) = delete;
  CpuBuffer& operator=(const CpuBuffer&) = delete;

  void* data() override { return data_; }
  uint64_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

class CpuTimer final : public Timer {
 public:
  explicit CpuTimer(int slots) : marks_(static_cast<size_t>(slots > 0 ? slots : 0)) {}
  void mark(int slot) override {
    if (slot >= 0 && static_cast<size_t>(slot) < marks_.size())
      marks_[static_cast<size_t>(slot)] = std::chrono::steady_clock::now();
  }
  double elapsed_ms(int from, int to) const override {
    if (from < 0 || to < 0 || static_cast<size_t>(from) >= marks_.size() ||
        static_cast<size_t>(to) >= marks_.size())
      return 0;
    return std::chrono::duration<double, std::milli>(marks_[static_cast<size_t>(to)] -
                                                     marks_[static_cast<size_t>(from)])
        .count();
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

// The CPU model from /proc/cpuinfo ("model name"), or "cpu" where it cannot be read.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "cpu";
}

class CpuBackend final : public Backend {
 public:
  const std::string& name() const override { return name_; }
  const std::string& device() const override { return device_; }
  std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes) override {
    return std::make_unique<CpuBuffer>(bytes);
  }
  void zero(void* device, size_t bytes) override {
    if (bytes) std::memset(device, 0, bytes);
  }
  const float* constant(const float* host, size_t) override { return host; }
  // Inputs and outputs are float32 in the arena: the host copies are the whole transfer.
  void bind_io(const std::vector<IoSlot>& inputs, const std::vector<IoSlot>& outputs) override {
    inputs_ = inputs;
    outputs_ = outputs;
  }
  void write_input(size_t k, const float* host) override {
    const IoSlot& s = inputs_.at(k);
    if (s.count) std::memcpy(s.device, host, s.count * sizeof(float));
  }
  void upload_inputs() override {}
  void download_outputs() override {}
  void read_output(size_t k, float* host) override {
    const IoSlot& s = outputs_.at(k);
    if (s.count) std::memcpy(host, s.device, s.count * sizeof(float));
  }
  void synchronize() override {}
  std::unique_ptr<Timer> make_timer(int slots) override { return std::make_unique<CpuTimer>(slots); }

 private:
  std::string name_ = "cpu";
  std::string device_ = cpu_model();
  std::vector<IoSlot> inputs_, outputs_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace infer::detail

namespace infer {

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name && *name ? name : "unknown";
}

CpuIsa openblas_isa() {
  static const CpuIsa level = [] {
    std::string n = openblas_core();
    for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* k : {"skylakex", "cooperlake", "sapphirerapids"})
      if (n == k) return CpuIsa::Avx512;
    // AVX2 / FMA kernels, and the AVX-only ones (above baseline x86-64, below infer's avx2 level).
    for (const char* k : {"haswell", "zen", "excavator", "steamroller", "piledriver", "bulldozer", "sandybridge"})
      if (n == k) return CpuIsa::Avx2;
    for (const char* k : {"katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2", "penryn",
                          "dunnington", "nehalem", "athlon", "opteron", "opteron_sse3", "barcelona", "nano",
                          "bobcat"})
      if (n == k) return CpuIsa::Baseline;
    return cpu_isa_supported();  // a name not known here: assume OpenBLAS uses the whole CPU
  }();
  return level;
}

}  // namespace infer
