// pybind11 side of bench/binding_choice (the measurement behind docs/python.md, "Why pybind11"):
// Model.load, Session(model, backend, batch) and run(float32 array) -> list of arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <cstring>
#include "infer/infer.h"
namespace py = pybind11;
PYBIND11_MODULE(pb, m) {
  py::register_exception<infer::Error>(m, "Error", PyExc_ValueError);
  py::class_<infer::Model>(m, "Model").def_static("load", &infer::Model::load)
      .def_property_readonly("name", &infer::Model::name)
      .def_property_readonly("metadata", &infer::Model::metadata);
  py::class_<infer::Session>(m, "Session")
      .def(py::init([](const infer::Model& md, const std::string& backend, int64_t batch) {
        infer::SessionOptions o; o.backend = backend; o.batch = batch; return new infer::Session(md, o); }))
      .def("run", [](infer::Session& s, py::array_t<float, py::array::c_style | py::array::forcecast> x) {
        infer::Tensor t; t.shape.assign(x.shape(), x.shape() + x.ndim());
        t.data.assign(x.data(), x.data() + x.size());
        std::vector<infer::Tensor> out;
        { py::gil_scoped_release r; out = s.run({t}); }
        py::list l;
        for (auto& o : out) {
          auto* v = new std::vector<float>(std::move(o.data));
          py::capsule c(v, [](void* p) { delete static_cast<std::vector<float>*>(p); });
          l.append(py::array_t<float>(std::vector<py::ssize_t>(o.shape.begin(), o.shape.end()), v->data(), c));
        }
        return l; });
}
