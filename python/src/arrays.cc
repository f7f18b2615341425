// Python objects <-> host tensors (arrays.h). The fast path (a float32 C-contiguous ndarray) is one
// memcpy; everything else goes through NumPy's own conversions, so strides, byte order and dtypes are
// handled by NumPy rather than re-implemented here.
#include "arrays.h"

#include <cstring>
#include <memory>
#include <vector>

#include "infer/error.h"

namespace infer::python {

namespace {

// NumPy's view of `obj` (no dtype change yet), or an infer::Error saying why there is none.
py::array numpy_view(py::handle obj, const std::string& what) {
  if (py::isinstance<py::array>(obj)) return py::reinterpret_borrow<py::array>(obj);
  py::module_ np = py::module_::import("numpy");
  try {
    if (py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__")) {
      const py::tuple device = obj.attr("__dlpack_device__")();
      const int type = device[0].cast<int>();
      if (type != 1)  // kDLCPU
        throw Error(what + ": is in device memory (DLPack device type " + std::to_string(type) +
                    "); this call takes host data (session.run takes CUDA tensors on a cuda session)");
      return np.attr("from_dlpack")(obj);
    }
    return np.attr("asarray")(obj);
  } catch (py::error_already_set& e) {
    throw Error(what + ": cannot be read as an array: " + py::str(e.value()).cast<std::string>());
  }
}

}  // namespace

FloatArray as_float_array(py::handle obj, const std::string& what) {
  if (py::isinstance<FloatArray>(obj)) return py::reinterpret_borrow<FloatArray>(obj);
  py::array a = numpy_view(obj, what);
  const char kind = a.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u')
    throw Error(what + ": dtype " + py::str(a.dtype()).cast<std::string>() +
                " is not supported (real float or integer dtypes are converted to float32)");
  // forcecast: NumPy converts the dtype (and byte order) and copies non-contiguous data in order.
  auto converted = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!converted) {
    PyErr_Clear();
    throw Error(what + ": cannot be converted to a float32 array");
  }
  return converted;
}

Tensor to_tensor(py::handle obj, const std::string& what) {
  FloatArray a = as_float_array(obj, what);
  Tensor t;
  t.shape.assign(a.shape(), a.shape() + a.ndim());
  t.data.resize(static_cast<size_t>(a.size()));
  if (a.size()) std::memcpy(t.data.data(), a.data(), static_cast<size_t>(a.size()) * sizeof(float));
  return t;
}

py::array to_numpy(Tensor&& t) {
  auto* data = new std::vector<float>(std::move(t.data));
  py::capsule owner(data, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  return FloatArray(shape, data->data(), owner);
}

}  // namespace infer::python
