// DLPack device tensors in and out (dlpack.h). A producer's capsule is borrowed for one run (never
// renamed, so its own destructor frees it); an exported capsule owns a copy of the DeviceTensor's
// shared pointer, released by the DLManagedTensor deleter whether or not a consumer took it.
#include "dlpack.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <vector>

#include "infer/error.h"

using namespace pybind11::literals;

namespace infer::python {
namespace {

constexpr const char* kCapsule = "dltensor";

// Owns what an exported DLManagedTensor points to.
struct Export {
  DeviceTensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
};

void delete_export(DLManagedTensor* m) { delete static_cast<Export*>(m->manager_ctx); }

py::capsule export_capsule(const DeviceTensor& t) {
  auto* e = new Export{t, std::vector<int64_t>(t.shape.begin(), t.shape.end()), {}};
  DLTensor& d = e->managed.dl_tensor;
  d.data = t.data.get();
  d.device = {kDLCUDA, t.device};
  d.ndim = static_cast<int>(e->shape.size());
  d.dtype = {kDLFloat, 32, 1};
  d.shape = e->shape.data();
  d.strides = nullptr;  // C-contiguous
  d.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_export;
  // A consumer renames the capsule to "used_dltensor" and calls the deleter itself; else we do.
  return py::capsule(&e->managed, kCapsule, [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, kCapsule)) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kCapsule));
      m->deleter(m);
    }
  });
}

std::string shape_text(const DLTensor& d) {
  Shape s(d.shape, d.shape + d.ndim);
  return shape_str(s);
}

}  // namespace

bool is_device_tensor(py::handle obj) {
  if (py::isinstance<py::array>(obj) || !py::hasattr(obj, "__dlpack_device__")) return false;
  try {
    const py::tuple device = obj.attr("__dlpack_device__")();
    const int type = device[0].cast<int>();
    return type == kDLCUDA || type == kDLCUDAManaged;
  } catch (py::error_already_set&) {
    return false;
  }
}

const float* device_input(py::handle obj, const Shape& shape, const std::string& what, py::object& keep) {
  try {
    keep = obj.attr("__dlpack__")("stream"_a = 1);  // order the producer's work before the legacy stream
  } catch (py::error_already_set& e) {
    throw Error(what + ": __dlpack__ failed: " + py::str(e.value()).cast<std::string>());
  }
  if (!PyCapsule_IsValid(keep.ptr(), kCapsule)) throw Error(what + ": __dlpack__ did not return a DLPack capsule");
  const auto* m = static_cast<const DLManagedTensor*>(PyCapsule_GetPointer(keep.ptr(), kCapsule));
  const DLTensor& d = m->dl_tensor;
  if (d.dtype.code != kDLFloat || d.dtype.bits != 32 || d.dtype.lanes != 1)
    throw Error(what + ": device tensors must be float32 (convert it first, e.g. x.float())");
  if (Shape(d.shape, d.shape + d.ndim) != shape)
    throw Error(what + ": expected shape " + shape_str(shape) + ", got " + shape_text(d));
  if (d.strides) {  // C-contiguous strides are allowed; dimensions of size 1 may have any stride
    int64_t expect = 1;
    for (int i = d.ndim - 1; i >= 0; --i) {
      if (d.shape[i] != 1 && d.strides[i] != expect)
        throw Error(what + ": non-contiguous device tensor (make it contiguous first, e.g. x.contiguous())");
      expect *= d.shape[i];
    }
  }
  return reinterpret_cast<const float*>(static_cast<const char*>(d.data) + d.byte_offset);
}

void bind_device_array(py::module_& m) {
  py::class_<DeviceArray>(m, "DeviceArray",
                          "A session output in GPU memory (run(..., device_outputs=True)); "
                          "torch.from_dlpack(a) takes it without a copy.")
      .def_property_readonly("shape", [](const DeviceArray& a) {
        py::tuple t(a.tensor.shape.size());  // built by hand: this file does not include pybind11/stl.h
        for (size_t i = 0; i < a.tensor.shape.size(); ++i) t[i] = py::int_(a.tensor.shape[i]);
        return t;
      })
      .def_property_readonly("dtype", [](const DeviceArray&) { return "float32"; })
      .def_property_readonly("device", [](const DeviceArray& a) { return a.tensor.device; })
      .def_property_readonly("data_ptr", [](const DeviceArray& a) {
        return reinterpret_cast<uintptr_t>(a.tensor.data.get());
      })
      .def("__dlpack_device__", [](const DeviceArray& a) { return py::make_tuple(int(kDLCUDA), a.tensor.device); })
      // The data is complete when run() returns (it synchronizes), so any consumer stream may read it.
      // Newer consumers also pass max_version / dl_device / copy: we answer with the unversioned
      // capsule, which the DLPack protocol lets every consumer accept.
      .def("__dlpack__", [](const DeviceArray& a, py::kwargs) { return export_capsule(a.tensor); })
      .def("__repr__", [](const DeviceArray& a) {
        return "<infer.DeviceArray " + shape_str(a.tensor.shape) + " float32 on cuda:" +
               std::to_string(a.tensor.device) + ">";
      });
}

}  // namespace infer::python
