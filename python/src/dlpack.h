// DLPack for device tensors (dlpack/dlpack.h, the 0.6 ABI that PyTorch, CuPy and JAX speak): reading a
// producer's CUDA tensor as a session input without a copy, and handing a session's device outputs
// out as DeviceArray objects that torch.from_dlpack takes without a copy. Host tensors never come
// here (arrays.h takes them through NumPy).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "infer/session.h"

namespace infer::python {

namespace py = pybind11;

// Whether `obj` is a DLPack producer whose data is in GPU memory (__dlpack_device__ says CUDA).
bool is_device_tensor(py::handle obj);

// The float32 data pointer of device tensor `obj`, checked against `shape` (C-contiguous, float32,
// CUDA); `keep` receives the capsule, which must outlive the use of the pointer. Error otherwise.
const float* device_input(py::handle obj, const Shape& shape, const std::string& what, py::object& keep);

// A session output in device memory, exported through __dlpack__.
struct DeviceArray {
  DeviceTensor tensor;
};

// Registers infer.DeviceArray.
void bind_device_array(py::module_& m);

}  // namespace infer::python
