// The backend interface (ggml style): what the session needs from a device, and nothing more. A
// backend allocates the one activation arena, makes constants visible to its kernels, copies tensors
// between the host and the arena, synchronizes, and times nodes. Each backend's implementation lives
// with its kernels (kernels/cpu/backend.cc, kernels/cuda/backend.cc: the engine includes nothing from
// kernels/); open_backend (backend.cc) opens one by the name a session is given.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "infer/error.h"
#include "infer/ops.h"

namespace infer::detail {

// One allocation on a backend's device, freed when destroyed.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() = 0;  // aligned to kArenaAlignment (planner.h)
  virtual uint64_t bytes() const = 0;
};

// Marks points in the stream of work and reports the time between them once synchronized (CPU:
// steady_clock when mark() is called; CUDA: events recorded on the stream).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void mark(int slot) = 0;                     // slot in [0, slots)
  virtual double elapsed_ms(int from, int to) const = 0;  // valid after Backend::synchronize()
};

// The median of timed runs (0 for none): what autotune and the profile report.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// A graph input or output as the arena holds it: `count` elements at `device`, stored in the session's
// precision (float32, or half under fp16). The user always sees float32.
struct IoSlot {
  void* device = nullptr;
  size_t count = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The registry's backend name of the kernels this backend runs ("cpu", "cuda").
  virtual const std::string& name() const = 0;
  // What runs the work, for reports: "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or the CPU model.
  virtual const std::string& device() const = 0;
  // The execution context kernels receive in KernelCall::context (nullptr on cpu).
  virtual void* context() { return nullptr; }

  // One allocation of `bytes` (may be 0: returns an empty buffer with data() == nullptr).
  // Throws infer::Error naming the bytes asked for when the device is out of memory.
  virtual std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes) = 0;
  // Sets `bytes` bytes at `device` to zero (creation time only).
  virtual void zero(void* device, size_t bytes) = 0;

  // A pointer kernels can read `count` floats of a host constant through (CPU: `host` itself; a GPU
  // backend uploads once, in the session's precision, and owns the copy for its lifetime).
  virtual const float* constant(const float* host, size_t count) = 0;

  // Graph inputs and outputs, bound once after the arena exists. A run is: write_input() for each
  // input (host side), upload_inputs(), the forward, download_outputs(), synchronize(), read_output()
  // for each output. Only the forward and the two transfers are device work; the cuda backend stages
  // through pinned host buffers (and float32 <-> half conversion kernels under fp16).
  virtual void bind_io(const std::vector<IoSlot>& inputs, const std::vector<IoSlot>& outputs) = 0;
  virtual void write_input(size_t k, const float* host) = 0;
  virtual void upload_inputs() = 0;
  virtual void download_outputs() = 0;
  virtual void read_output(size_t k, float* host) = 0;
  virtual void synchronize() = 0;

  // Device I/O for Session::run_device (GPU backends; the default refuses): copy_input_device() checks
  // that `device` is memory of this backend's GPU and copies input k from it into the arena (converted
  // under fp16), copy_output_device() the reverse for output k; both stream-ordered, like the uploads.
  // device_ordinal() is the GPU the backend runs on (-1: none).
  virtual void copy_input_device(size_t, const float*) {
    throw Error("device inputs need a cuda session (this one runs on " + name() + ")");
  }
  virtual void copy_output_device(size_t, float*) {
    throw Error("device outputs need a cuda session (this one runs on " + name() + ")");
  }
  virtual int device_ordinal() const { return -1; }
  // Makes this backend's device the calling thread's current one (cuda: cudaSetDevice, since a CUDA
  // session may run on another GPU than the thread's) and returns the device to restore afterwards
  // (-1: nothing to restore). DeviceScope pairs the two around every session call.
  virtual int make_current() { return -1; }

  // Records the work issued between begin_capture() and end_capture() (cuda: a CUDA graph) so that
  // replay() re-issues it; a backend that cannot capture returns false from begin_capture() and the
  // executor calls the kernels itself every run. abort_capture() discards a capture after an error.
  virtual bool begin_capture() { return false; }
  virtual void end_capture() {}
  virtual void abort_capture() {}
  // Forgets the captured forward (the executor rebuilds its calls on a new arena).
  virtual void drop_capture() {}
  virtual bool replay() { return false; }

  virtual std::unique_ptr<Timer> make_timer(int slots) = 0;

  // Bytes this backend's device allocations of the process hold now (cuda: every DeviceArray); the
  // session reads it around prepare() to report prepared weights. 0 where not tracked (cpu).
  virtual uint64_t allocated_bytes() { return 0; }

  // Device memory in use (every process) and the device's total, in bytes; 0 and 0 where not known.
  virtual void device_memory(uint64_t* used, uint64_t* total) {
    *used = 0;
    *total = 0;
  }
};

std::unique_ptr<Backend> make_cpu_backend();  // kernels/cpu/backend.cc
#ifdef INFER_WITH_CUDA
// The CUDA backend (kernels/cuda/backend.cc) for a session of the given precision on GPU `device`
// (-1: the calling thread's current device); an Error if there is no GPU or no GPU `device`. The
// thread's current device is left as it was.
std::unique_ptr<Backend> make_cuda_backend(Precision precision, int device);
bool cuda_device_available();
void set_current_device(int ordinal);  // cudaSetDevice; never throws (restoring after a call)
#endif

// Holds a backend's device current for the calling thread while it lives (Backend::make_current),
// then restores the previous one. Stores only that ordinal, so it may outlive the backend.
class DeviceScope {
 public:
  explicit DeviceScope(Backend& backend) : previous_(backend.make_current()) {}
  ~DeviceScope() {
#ifdef INFER_WITH_CUDA
    if (previous_ >= 0) set_current_device(previous_);
#endif
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
};

// A backend opened by SessionOptions::backend (backend.cc).
struct OpenedBackend {
  std::unique_ptr<Backend> backend;
  std::string name;             // as reported: "cpu", "cuda" or "reference"
  bool reference_only = false;  // "reference": the cpu backend offering only the reference variants
};
// "auto" is cuda when this build has it and a GPU is present, else cpu. An Error for an unknown name
// or precision value, a precision the backend does not run (cpu and reference: fp32 only), cuda in
// a build without it, or a `device` (SessionOptions::device) the backend does not have (cpu and
// reference: -1 or 0 only, their one device).
OpenedBackend open_backend(const std::string& name, Precision precision, int device = -1);

}  // namespace infer::detail
