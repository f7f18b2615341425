// What every CUDA kernel shares: the execution context it receives through KernelCall::context (one
// stream and a cuBLAS handle bound to it with a fixed workspace, so a whole forward can be captured
// into a CUDA graph), checked-call macros that turn CUDA/cuBLAS failures into infer::Error,
// and owned device memory for what prepare() uploads. Plain C++: included by .cc and .cu files alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "infer/kernel.h"

struct cudnnContext;  // cudnnHandle_t, without cudnn.h here (kernels/cuda/cudnn.h)

namespace infer::cuda {

struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;      // on `stream`, with a fixed workspace (capture-safe)
  cudnnContext* cudnn = nullptr;        // on `stream` (builds with cuDNN; created here, never lazily,
                                        // since creating one inside a CUDA-graph capture fails)
  int device = 0, sm_count = 0, cc_major = 0, cc_minor = 0;
};

// Creates the stream, the cuBLAS handle and its workspace on the current device; destroys them.
class ContextOwner {
 public:
  ContextOwner();
  ~ContextOwner();
  ContextOwner(const ContextOwner&) = delete;
  ContextOwner& operator=(const ContextOwner&) = delete;
  Context& get() { return ctx_; }

 private:
  void release();
  Context ctx_;
  void* cublas_workspace_ = nullptr;
};

// True when the CUDA runtime sees at least one device (never throws).
bool device_available();
// The current device's SM count and compute-capability major (zeros without a device), for the
// choices a kernel makes before it has a Context (applicability, workspace sizes) and must make the
// same way again in run().
struct DeviceInfo {
  int sm_count = 0, cc_major = 0;
};
DeviceInfo current_device_info();
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" for the current device.
std::string device_description();

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line);

// The context of a call; an Error if the backend passed none.
Context& context_of(const KernelCall& call);

// Bytes of one stored element (activation or constant) in precision p: 2 for FP16, else 4.
inline size_t element_size(Precision p) { return p == Precision::FP16 ? 2 : 4; }

// Device memory owned by a prepared kernel state (or the backend); freed when destroyed.
class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes);  // cudaMalloc; an Error naming the bytes if it fails
  ~DeviceArray();
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Copies `count` float32 host values to new device memory stored as precision p's element type
// (float, or half rounded to nearest). Synchronous: for session creation and prepare(), never a run.
std::unique_ptr<DeviceArray> upload(const float* host, size_t count, Precision p);
// The same for bytes as they are (packed int8 weights, int32 sums, float tables whatever the precision).
std::unique_ptr<DeviceArray> upload_bytes(const void* host, size_t bytes);

// Bytes of device memory every DeviceArray of this process holds now (prepared weights, uploads,
// arenas): the profile's weight and memory report reads it.
uint64_t device_array_bytes();

}  // namespace infer::cuda

#define INFER_CUDA_CHECK(expr)                                                       \
  do {                                                                               \
    cudaError_t infer_cuda_err_ = (expr);                                            \
    if (infer_cuda_err_ != cudaSuccess)                                              \
      ::infer::cuda::throw_cuda_error(infer_cuda_err_, #expr, __FILE__, __LINE__);   \
  } while (0)

#define INFER_CUBLAS_CHECK(expr)                                                     \
  do {                                                                               \
    cublasStatus_t infer_cublas_st_ = (expr);                                        \
    if (infer_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::infer::cuda::throw_cublas_error(infer_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define INFER_CUDA_CHECK_LAUNCH() INFER_CUDA_CHECK(cudaGetLastError())
