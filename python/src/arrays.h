// Conversion between Python objects and the engine's host tensors. Inputs: NumPy arrays, anything with
// the buffer protocol or __array__, and CPU __dlpack__ producers (PyTorch tensors) become float32
// C-contiguous copies (other real dtypes are converted, strides honoured, never read wrongly); outputs
// become NumPy arrays that own the engine's result without a copy. Every failure is an infer::Error.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "infer/tensor.h"

namespace infer::python {

namespace py = pybind11;

// A float32 C-contiguous NumPy array: what inputs become and what outputs are.
using FloatArray = py::array_t<float, py::array::c_style>;

// `obj` as a float32 C-contiguous array; `what` names the input in messages ("input 0 'z'").
FloatArray as_float_array(py::handle obj, const std::string& what);

// Copies `obj` (as as_float_array) into a host tensor.
Tensor to_tensor(py::handle obj, const std::string& what);

// A NumPy array owning `t`'s data (moved, not copied).
py::array to_numpy(Tensor&& t);

}  // namespace infer::python
