// The CPU backend: the arena is 256-byte aligned host memory, constants are used in place (the
// kernels read the mmapped file or the graph's own storage), copies are memcpy, work is synchronous
// and nodes are timed with std::chrono::steady_clock.
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "backend.h"
#include "infer/error.h"
#include "planner.h"

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

class CpuBackend final : public Backend {
 public:
  const std::string& name() const override { return name_; }
  std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes) override {
    return std::make_unique<CpuBuffer>(bytes);
  }
  const float* constant(const float* host, size_t) override { return host; }
  void copy_in(void* device_dst, const void* host_src, size_t bytes) override {
    if (bytes) std::memcpy(device_dst, host_src, bytes);
  }
  void copy_out(void* host_dst, const void* device_src, size_t bytes) override {
    if (bytes) std::memcpy(host_dst, device_src, bytes);
  }
  void synchronize() override {}
  std::unique_ptr<Timer> make_timer(int slots) override { return std::make_unique<CpuTimer>(slots); }

 private:
  std::string name_ = "cpu";
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace infer::detail
