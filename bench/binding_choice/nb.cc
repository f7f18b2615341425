// nanobind side of bench/binding_choice: the same bindings as pb.cc.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include "infer/infer.h"
namespace nb = nanobind;
NB_MODULE(nb_, m) {
  nb::exception<infer::Error>(m, "Error", PyExc_ValueError);
  nb::class_<infer::Model>(m, "Model").def_static("load", &infer::Model::load)
      .def_prop_ro("name", &infer::Model::name)
      .def_prop_ro("metadata", &infer::Model::metadata);
  nb::class_<infer::Session>(m, "Session")
      .def("__init__", [](infer::Session* self, const infer::Model& md, const std::string& backend, int64_t batch) {
        infer::SessionOptions o; o.backend = backend; o.batch = batch; new (self) infer::Session(md, o); })
      .def("run", [](infer::Session& s, nb::ndarray<const float, nb::c_contig, nb::device::cpu> x) {
        infer::Tensor t; for (size_t i = 0; i < x.ndim(); ++i) t.shape.push_back(x.shape(i));
        t.data.assign(x.data(), x.data() + x.size());
        std::vector<infer::Tensor> out;
        { nb::gil_scoped_release r; out = s.run({t}); }
        nb::list l;
        for (auto& o : out) {
          auto* v = new std::vector<float>(std::move(o.data));
          nb::capsule c(v, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
          std::vector<size_t> shape(o.shape.begin(), o.shape.end());
          l.append(nb::ndarray<nb::numpy, float>(v->data(), shape.size(), shape.data(), c));
        }
        return l; });
}
