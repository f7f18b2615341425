// The CUDA execution context (stream + a cuBLAS handle with a fixed workspace), error
// reporting for checked CUDA/cuBLAS calls, and owned device memory. cuBLAS gets its workspace here,
// once, because a handle that allocates its own during stream capture breaks CUDA-graph capture.
#include "kernels/cuda/context.h"

#include <atomic>
#include <vector>

#include <cuda_fp16.h>
#include <fmt/format.h>

#include "infer/error.h"
#ifdef INFER_WITH_CUDNN
#include "kernels/cuda/cudnn.h"
#endif

namespace infer::cuda {
namespace {

// Hopper's recommended cuBLAS workspace (cuBLAS docs, cublasSetWorkspace: 32 MiB on sm_90).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

std::atomic<uint64_t> g_device_array_bytes{0};

const char* file_name(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/') base = p + 1;
  return base;
}

}  // namespace

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a sticky launch error so the next check reports its own
  throw Error(fmt::format("cuda: {} failed: {} ({}) at {}:{}", expr, cudaGetErrorString(err),
                          cudaGetErrorName(err), file_name(file), line));
}

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  throw Error(fmt::format("cublas: {} failed: {} at {}:{}", expr, cublasGetStatusString(status),
                          file_name(file), line));
}

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

DeviceInfo current_device_info() {
  DeviceInfo d;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return d;
}

std::string device_description() {
  int dev = 0;
  INFER_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  INFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return fmt::format("{} (sm_{}{}, {} SMs)", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
}

Context& context_of(const KernelCall& call) {
  if (!call.context) throw Error("cuda kernel called without a CUDA context");
  return *static_cast<Context*>(call.context);
}

ContextOwner::ContextOwner() {
  if (!device_available()) throw Error("cuda: no CUDA device is available");
  INFER_CUDA_CHECK(cudaGetDevice(&ctx_.device));
  cudaDeviceProp prop{};
  INFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx_.device));
  ctx_.sm_count = prop.multiProcessorCount;
  ctx_.cc_major = prop.major;
  ctx_.cc_minor = prop.minor;
  try {
    INFER_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    INFER_CUBLAS_CHECK(cublasCreate(&ctx_.cublas));
    INFER_CUBLAS_CHECK(cublasSetStream(ctx_.cublas, ctx_.stream));
    // Strict float32 unless a kernel asks for TF32 through its compute type (cublasGemmEx).
    INFER_CUBLAS_CHECK(cublasSetMathMode(ctx_.cublas, CUBLAS_DEFAULT_MATH));
    cudaError_t err = cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes);
    if (err != cudaSuccess)
      throw Error(fmt::format("cuda: out of memory allocating {} bytes for the cuBLAS workspace ({})",
                              kCublasWorkspaceBytes, cudaGetErrorString(err)));
    INFER_CUBLAS_CHECK(cublasSetWorkspace(ctx_.cublas, cublas_workspace_, kCublasWorkspaceBytes));
#ifdef INFER_WITH_CUDNN
    ctx_.cudnn = dnn::create_handle(ctx_.stream);
#endif
  } catch (...) {
    release();
    throw;
  }
}

ContextOwner::~ContextOwner() { release(); }

void ContextOwner::release() {
  // Teardown never throws: errors here would only hide the one being reported.
  if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
  if (ctx_.cublas) cublasDestroy(ctx_.cublas);
#ifdef INFER_WITH_CUDNN
  if (ctx_.cudnn) dnn::destroy_handle(ctx_.cudnn);
#endif
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  ctx_ = Context{};
  cublas_workspace_ = nullptr;
}

DeviceArray::DeviceArray(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    ptr_ = nullptr;
    throw Error(fmt::format("cuda: out of memory allocating {} bytes of device memory ({})", bytes,
                            cudaGetErrorString(err)));
  }
  g_device_array_bytes += bytes;
}

DeviceArray::~DeviceArray() {
  if (ptr_) {
    cudaFree(ptr_);
    g_device_array_bytes -= bytes_;
  }
}

uint64_t device_array_bytes() { return g_device_array_bytes.load(); }

std::unique_ptr<DeviceArray> upload(const float* host, size_t count, Precision p) {
  if (p != Precision::FP16 || count == 0) return upload_bytes(host, count * element_size(p));
  if (!host) throw Error("cuda upload: null host data");
  std::vector<__half> half(count);
  for (size_t i = 0; i < count; ++i) half[i] = __float2half_rn(host[i]);
  return upload_bytes(half.data(), count * sizeof(__half));
}

std::unique_ptr<DeviceArray> upload_bytes(const void* host, size_t bytes) {
  auto out = std::make_unique<DeviceArray>(bytes);
  if (bytes == 0) return out;
  if (!host) throw Error("cuda upload: null host data");
  INFER_CUDA_CHECK(cudaMemcpy(out->data(), host, bytes, cudaMemcpyHostToDevice));
  return out;
}

}  // namespace infer::cuda
