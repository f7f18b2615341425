// The CUDA backend: one stream (and cuBLAS handles on it, kernels/cuda/context.h), the arena as one
// cudaMalloc, constants uploaded once in the session's precision, graph inputs and outputs staged
// through pinned host buffers (plus float32 <-> half conversion on the device under fp16), the
// forward captured once into a CUDA graph and replayed, and nodes timed with events on the stream.
// Built only with INFER_WITH_CUDA. Every CUDA call is checked; failures are infer::Error.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/src/backend.h"
#include "infer/error.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/epilogue.h"

namespace infer::detail {
namespace {

class CudaBuffer final : public DeviceBuffer {
 public:
  explicit CudaBuffer(uint64_t bytes) : array_(static_cast<size_t>(bytes)) {}
  void* data() override { return array_.data(); }
  uint64_t bytes() const override { return array_.bytes(); }

 private:
  cuda::DeviceArray array_;  // cudaMalloc: 256-byte aligned, as the planner's offsets need
};

// Page-locked host memory: asynchronous copies from and to it need no staging by the driver, and a
// CUDA graph can hold the copies.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    cudaError_t err = cudaMallocHost(&ptr_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      ptr_ = nullptr;
      throw Error(fmt::format("cuda: cannot allocate {} bytes of pinned host memory ({})", bytes,
                              cudaGetErrorString(err)));
    }
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  float* data() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class CudaTimer final : public Timer {
 public:
  CudaTimer(int slots, cudaStream_t stream) : stream_(stream) {
    events_.resize(static_cast<size_t>(slots > 0 ? slots : 0), nullptr);
    for (cudaEvent_t& e : events_) INFER_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~CudaTimer() override {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
  }
  void mark(int slot) override {
    if (slot >= 0 && static_cast<size_t>(slot) < events_.size())
      INFER_CUDA_CHECK(cudaEventRecord(events_[static_cast<size_t>(slot)], stream_));
  }
  double elapsed_ms(int from, int to) const override {
    if (from < 0 || to < 0 || static_cast<size_t>(from) >= events_.size() ||
        static_cast<size_t>(to) >= events_.size())
      return 0;
    float ms = 0;
    INFER_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[static_cast<size_t>(from)],
                                          events_[static_cast<size_t>(to)]));
    return ms;
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(Precision precision) : precision_(precision) {
    device_ = cuda::device_description();
    ordinal_ = owner_.get().device;
  }
  ~CudaBackend() override {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }

  const std::string& name() const override { return name_; }
  const std::string& device() const override { return device_; }
  void* context() override { return &owner_.get(); }

  std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes) override {
    return std::make_unique<CudaBuffer>(bytes);
  }
  void zero(void* device, size_t bytes) override {
    if (bytes) {
      INFER_CUDA_CHECK(cudaMemsetAsync(device, 0, bytes, stream()));
      INFER_CUDA_CHECK(cudaStreamSynchronize(stream()));
    }
  }

  const float* constant(const float* host, size_t count) override {
    auto it = constants_.find(host);
    if (it != constants_.end()) return static_cast<const float*>(it->second->data());
    auto array = cuda::upload(host, count, precision_);
    const float* ptr = static_cast<const float*>(array->data());
    constants_.emplace(host, std::move(array));
    return ptr;
  }

  void bind_io(const std::vector<IoSlot>& inputs, const std::vector<IoSlot>& outputs) override {
    auto stage = [&](const std::vector<IoSlot>& slots, std::vector<Staged>& out) {
      out.clear();
      for (const IoSlot& s : slots) {
        Staged st;
        st.slot = s;
        st.pinned = std::make_unique<PinnedBuffer>(s.count * sizeof(float));
        if (precision_ == Precision::FP16)  // float32 copy on the device, converted by a kernel
          st.device_f32 = std::make_unique<cuda::DeviceArray>(s.count * sizeof(float));
        out.push_back(std::move(st));
      }
    };
    stage(inputs, inputs_);
    stage(outputs, outputs_);
  }
  void write_input(size_t k, const float* host) override {
    const Staged& s = inputs_.at(k);
    if (s.slot.count) std::memcpy(s.pinned->data(), host, s.slot.count * sizeof(float));
  }
  void upload_inputs() override {
    for (const Staged& s : inputs_) {
      if (!s.slot.count) continue;
      void* dst = s.device_f32 ? s.device_f32->data() : s.slot.device;
      INFER_CUDA_CHECK(cudaMemcpyAsync(dst, s.pinned->data(), s.slot.count * sizeof(float),
                                       cudaMemcpyHostToDevice, stream()));
      if (s.device_f32)
        cuda::convert_f32_to_f16(s.device_f32->as<float>(), s.slot.device,
                                 static_cast<int64_t>(s.slot.count), stream());
    }
  }
  void download_outputs() override {
    for (const Staged& s : outputs_) {
      if (!s.slot.count) continue;
      const void* src = s.slot.device;
      if (s.device_f32) {
        cuda::convert_f16_to_f32(s.slot.device, s.device_f32->as<float>(),
                                 static_cast<int64_t>(s.slot.count), stream());
        src = s.device_f32->data();
      }
      INFER_CUDA_CHECK(cudaMemcpyAsync(s.pinned->data(), src, s.slot.count * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream()));
    }
  }
  void read_output(size_t k, float* host) override {
    const Staged& s = outputs_.at(k);
    if (s.slot.count) std::memcpy(host, s.pinned->data(), s.slot.count * sizeof(float));
  }
  void synchronize() override { INFER_CUDA_CHECK(cudaStreamSynchronize(stream())); }

  void copy_input_device(size_t k, const float* device) override {
    const Staged& s = inputs_.at(k);
    check_device_pointer(device, "input " + std::to_string(k));
    // Inputs are ready once the legacy default stream is: producers order their work before it
    // (DLPack's stream=1), and this session's stream is non-blocking, so wait for it here.
    if (k == 0) INFER_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    if (!s.slot.count) return;
    if (s.device_f32)
      cuda::convert_f32_to_f16(device, s.slot.device, static_cast<int64_t>(s.slot.count), stream());
    else
      INFER_CUDA_CHECK(cudaMemcpyAsync(s.slot.device, device, s.slot.count * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream()));
  }
  void copy_output_device(size_t k, float* device) override {
    const Staged& s = outputs_.at(k);
    if (!s.slot.count) return;
    if (s.device_f32)
      cuda::convert_f16_to_f32(s.slot.device, device, static_cast<int64_t>(s.slot.count), stream());
    else
      INFER_CUDA_CHECK(cudaMemcpyAsync(device, s.slot.device, s.slot.count * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream()));
  }
  int device_ordinal() const override { return ordinal_; }
  int make_current() override {
    int current = -1;
    INFER_CUDA_CHECK(cudaGetDevice(&current));
    if (current == ordinal_) return -1;
    INFER_CUDA_CHECK(cudaSetDevice(ordinal_));
    return current;
  }

  bool begin_capture() override {
    // Thread-local mode: CUDA calls of other threads (another session) do not break this capture.
    INFER_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    return true;
  }
  void end_capture() override {
    cudaGraph_t graph = nullptr;
    INFER_CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
    drop_capture();  // a re-plan (autotune) captures again: the old graph ran on the old arena
    graph_ = graph;
    INFER_CUDA_CHECK(cudaGraphInstantiate(&graph_exec_, graph_, 0));
    // Uploads the graph's work descriptors now so the first replay costs what every replay does.
    INFER_CUDA_CHECK(cudaGraphUpload(graph_exec_, stream()));
    INFER_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  void abort_capture() override {
    cudaGraph_t graph = nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      if (cudaStreamEndCapture(stream(), &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    }
    cudaGetLastError();
  }
  void drop_capture() override {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (graph_) cudaGraphDestroy(graph_);
    graph_exec_ = nullptr;
    graph_ = nullptr;
  }
  bool replay() override {
    if (!graph_exec_) return false;
    INFER_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream()));
    return true;
  }

  std::unique_ptr<Timer> make_timer(int slots) override {
    return std::make_unique<CudaTimer>(slots, stream());
  }

  uint64_t allocated_bytes() override { return cuda::device_array_bytes(); }

  void device_memory(uint64_t* used, uint64_t* total) override {
    size_t free_b = 0, total_b = 0;
    INFER_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    *used = total_b - free_b;
    *total = total_b;
  }

 private:
  struct Staged {
    IoSlot slot;
    std::unique_ptr<PinnedBuffer> pinned;
    std::unique_ptr<cuda::DeviceArray> device_f32;  // fp16 only
  };

  cudaStream_t stream() { return owner_.get().stream; }
  // A user's device pointer must be device (or managed) memory of this session's GPU.
  void check_device_pointer(const void* p, const std::string& what) const {
    cudaPointerAttributes attr{};
    const bool ok = p && cudaPointerGetAttributes(&attr, p) == cudaSuccess &&
                    (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                    attr.device == ordinal_;
    cudaGetLastError();  // clear a failed query's error
    if (!ok)
      throw Error(what + ": not memory of this session's GPU (cuda:" + std::to_string(ordinal_) + ")");
  }

  std::string name_ = "cuda";
  std::string device_;
  Precision precision_;
  cuda::ContextOwner owner_;  // declared before every device resource below, so destroyed after them
  int ordinal_ = 0;           // owner_'s device
  std::map<const float*, std::unique_ptr<cuda::DeviceArray>> constants_;
  std::vector<Staged> inputs_, outputs_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
};

}  // namespace

bool cuda_device_available() { return cuda::device_available(); }

void set_current_device(int ordinal) {
  if (cudaSetDevice(ordinal) != cudaSuccess) cudaGetLastError();
}

std::unique_ptr<Backend> make_cuda_backend(Precision precision, int device) {
  if (!cuda::device_available())
    throw Error("backend cuda: no CUDA device is available (use --backend cpu or auto)");
  if (device < 0) return std::make_unique<CudaBackend>(precision);
  int count = 0;
  INFER_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= count)
    throw Error(fmt::format("backend cuda: no device {}: this machine has {} CUDA device(s) (0..{})", device,
                            count, count - 1));
  // The backend's stream, handles and memory belong to the device current while it is created.
  int previous = 0;
  INFER_CUDA_CHECK(cudaGetDevice(&previous));
  INFER_CUDA_CHECK(cudaSetDevice(device));
  std::unique_ptr<Backend> backend;
  try {
    backend = std::make_unique<CudaBackend>(precision);
  } catch (...) {
    set_current_device(previous);
    throw;
  }
  set_current_device(previous);
  return backend;
}

}  // namespace infer::detail
