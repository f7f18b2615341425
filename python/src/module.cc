// The `infer._infer` extension module: pybind11 bindings of the engine's public API (Model, Session,
// profiles), the ONNX importer and the model zoo (linked from apps/onnx2fb and models/, not copied),
// and the apps' shared helpers (seeded inputs, images). The pure-Python layer (python/infer/) adds
// the Profile class and the submodules; dlpack.h does device tensors. infer::Error becomes infer.Error (a ValueError); the GIL is
// released while the engine works, and each Session serialises its own calls with a mutex.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "app_metadata.h"
#include "arrays.h"
#include "dlpack.h"
#include "image_io.h"
#include "infer/infer.h"
#include "onnx_import.h"
#include "random_input.h"
#include "zoo.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace infer::python {
namespace {

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16})
    if (name == precision_name(p)) return p;
  throw Error("unknown precision '" + name + "' (fp32, tf32, fp16)");
}

const char* numpy_dtype(DType d) { return d == DType::F16 ? "float16" : "float32"; }

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = s[i];
  return t;
}

py::list infos(const std::vector<TensorInfo>& list) {
  py::list out;
  for (const TensorInfo& t : list) out.append(py::cast(t));
  return out;
}

// The bytes of any buffer-protocol object, in logical order (PyBytes_FromObject copies strided
// buffers correctly).
std::vector<uint8_t> buffer_bytes(const py::buffer& b) {
  py::object bytes = py::reinterpret_steal<py::object>(PyBytes_FromObject(b.ptr()));
  if (!bytes) {
    PyErr_Clear();
    throw Error("Model.from_bytes: cannot read the buffer's bytes");
  }
  const std::string_view view = bytes.cast<std::string_view>();
  return std::vector<uint8_t>(view.begin(), view.end());
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw Error("cannot write '" + path + "'");
}

py::list to_numpy_list(std::vector<Tensor>&& out) {
  py::list list;
  for (Tensor& t : out) list.append(to_numpy(std::move(t)));
  return list;
}

// A Session as Python holds it: the model (for its metadata) and a mutex, so that two threads sharing
// one session take turns instead of corrupting its arena.
struct PySession {
  Model model;
  Session session;
  std::mutex mutex;
  // Seconds the engine call of the last run() took (steady_clock around it, lock held), so that
  // bench/python_overhead.py can subtract it from the same call's Python-side time.
  double last_engine_seconds = 0;

  // Calls `f` (an engine call) with the GIL released and the session's lock held; times it.
  template <class F>
  auto locked(F&& f) {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex);
    const auto t0 = std::chrono::steady_clock::now();
    auto result = f();
    last_engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  }

  PySession(const Model& m, const SessionOptions& o) : model(m), session(m, o) {}

  std::string label(size_t k) const {
    return "input " + std::to_string(k) + " '" + session.inputs()[k].name + "'";
  }

  // The positional / dict / sequence forms of run() as one list in the model's input order.
  std::vector<py::object> ordered(const py::args& args) const {
    const std::vector<TensorInfo>& want = session.inputs();
    std::vector<py::object> items;
    if (args.size() == 1 && py::isinstance<py::dict>(args[0])) {
      py::dict d = args[0];
      for (auto item : d) {
        const std::string key = py::str(item.first);
        bool known = false;
        for (const TensorInfo& t : want) known |= t.name == key;
        if (!known) {
          std::string names;
          for (const TensorInfo& t : want) names += (names.empty() ? "'" : ", '") + t.name + "'";
          throw Error("run: unknown input '" + key + "' (the model's inputs: " + names + ")");
        }
      }
      for (size_t k = 0; k < want.size(); ++k) {
        if (!d.contains(want[k].name)) throw Error("run: missing " + label(k));
        items.push_back(d[py::str(want[k].name)]);
      }
      return items;
    }
    py::sequence seq = args;
    if (args.size() == 1 && (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0])))
      seq = args[0];
    if (seq.size() != want.size())
      throw Error("run: the model has " + std::to_string(want.size()) + " input(s), got " +
                  std::to_string(seq.size()));
    for (size_t k = 0; k < want.size(); ++k) items.push_back(seq[k]);
    return items;
  }

  std::vector<Tensor> gather(const py::args& args) const {
    std::vector<Tensor> in;
    std::vector<py::object> items = ordered(args);
    for (size_t k = 0; k < items.size(); ++k) in.push_back(to_tensor(items[k], label(k)));
    return in;
  }

  // run(): host inputs through NumPy, or (all) device tensors through DLPack without a host copy.
  py::list run(const py::args& args, bool device_outputs) {
    std::vector<py::object> items = ordered(args);
    size_t on_device = 0;
    for (const py::object& item : items) on_device += is_device_tensor(item);
    if (on_device == 0) {
      if (device_outputs)
        throw Error("run: device_outputs=True needs the inputs on the GPU (DLPack CUDA tensors)");
      // NumPy outputs allocated here (uninitialized) and written in place: the inputs are read where
      // they are (no copy unless a dtype or stride needs one), nothing zero-filled.
      std::vector<FloatArray> arrays;
      std::vector<TensorView> in = host_views(items, arrays);
      const std::vector<Shape> shapes = locked([&] {
        try {
          return session.output_shapes(in);
        } catch (const Error& e) {  // the user called run(): say so
          const std::string m = e.what(), prefix = "output_shapes: ";
          throw Error(m.rfind(prefix, 0) == 0 ? "run: " + m.substr(prefix.size()) : m);
        }
      });
      py::list list;
      std::vector<TensorSpan> out;
      for (const Shape& shape : shapes) {
        FloatArray o(std::vector<py::ssize_t>(shape.begin(), shape.end()));
        out.push_back({shape, o.mutable_data()});
        list.append(o);
      }
      locked([&] { session.run_into(in, out); return 0; });
      return list;
    }
    if (on_device != items.size()) throw Error("run: inputs must be all on the host or all on the GPU");
    std::vector<py::object> keep(items.size());
    std::vector<const float*> ptrs;
    for (size_t k = 0; k < items.size(); ++k)
      ptrs.push_back(device_input(items[k], session.inputs()[k].shape, label(k), keep[k]));
    if (device_outputs) {
      std::vector<DeviceTensor> out = locked([&] { return session.run_device(ptrs); });
      py::list list;
      for (DeviceTensor& t : out) list.append(py::cast(DeviceArray{std::move(t)}));
      return list;
    }
    return to_numpy_list(locked([&] { return session.run_device_to_host(ptrs); }));
  }

  // run_into(): host inputs as run() takes them, outputs written into `outs` (float32, C-contiguous,
  // writeable NumPy arrays of the output shapes: a server's reused buffers). Returns `outs`.
  py::list run_into(const py::list& outs, const py::args& args) {
    std::vector<py::object> items = ordered(args);
    for (const py::object& item : items)
      if (is_device_tensor(item)) throw Error("run(out=...): takes host inputs (NumPy), not device tensors");
    std::vector<FloatArray> arrays;
    std::vector<TensorView> in = host_views(items, arrays);
    std::vector<TensorSpan> out;
    for (size_t k = 0; k < outs.size(); ++k) {
      py::handle o = outs[k];
      if (!py::isinstance<FloatArray>(o))
        throw Error("run(out=...): output " + std::to_string(k) +
                    " must be a float32 C-contiguous NumPy array");
      auto a = py::reinterpret_borrow<FloatArray>(o);
      if (!a.writeable()) throw Error("run(out=...): output " + std::to_string(k) + " is read-only");
      out.push_back({Shape(a.shape(), a.shape() + a.ndim()), a.mutable_data()});
    }
    locked([&] { session.run_into(in, out); return 0; });
    return outs;
  }

  std::vector<TensorView> host_views(const std::vector<py::object>& items, std::vector<FloatArray>& keep) const {
    std::vector<TensorView> in;
    for (size_t k = 0; k < items.size(); ++k) {
      keep.push_back(as_float_array(items[k], label(k)));
      const FloatArray& a = keep.back();
      in.push_back({Shape(a.shape(), a.shape() + a.ndim()), a.data()});
    }
    return in;
  }

  std::vector<Tensor> random(uint64_t seed) const {
    const bool latent = cli::read_metadata(model, model.origin()).task == "generator";
    return random_inputs(session.inputs(), latent, seed);
  }
};

}  // namespace
}  // namespace infer::python

PYBIND11_MODULE(_infer, m) {
  using namespace infer;
  using namespace infer::python;
  m.doc() = "infer's extension module; use the `infer` package.";
  m.attr("__version__") = infer::version();
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  bind_device_array(m);

  m.def("cuda_available", []() { return cuda_available(); }, "Whether this build has the CUDA backend and a GPU is present.");

  py::class_<TensorInfo>(m, "TensorInfo", "A model input or output: name, shape (-1 = batch), dtype.")
      .def_property_readonly("name", [](const TensorInfo& t) { return t.name; })
      .def_property_readonly("shape", [](const TensorInfo& t) { return shape_tuple(t.shape); })
      .def_property_readonly("dtype", [](const TensorInfo& t) { return numpy_dtype(t.dtype); })
      .def("__repr__", [](const TensorInfo& t) {
        return "TensorInfo(name='" + t.name + "', shape=" + py::repr(shape_tuple(t.shape)).cast<std::string>() +
               ", dtype='" + numpy_dtype(t.dtype) + "')";
      });

  py::class_<Model>(m, "Model", "A loaded, verified model; immutable, may be shared between threads.")
      .def_static("load", [](const std::string& path) {
        py::gil_scoped_release release;
        return Model::load(path);
      }, "path"_a, "Loads (mmaps, verifies, validates) a .fb model file.")
      .def_static("from_bytes", [](const py::buffer& b) { return Model::from_bytes(buffer_bytes(b)); },
                  "data"_a, "Parses a model held in memory (bytes, bytearray, memoryview).")
      .def_property_readonly("name", &Model::name)
      .def_property_readonly("description", &Model::description)
      .def_property_readonly("producer", &Model::producer)
      .def_property_readonly("format_version", &Model::format_version)
      .def_property_readonly("metadata", &Model::metadata)
      .def_property_readonly("weight_bytes", &Model::weight_bytes)
      .def_property_readonly("inputs", [](const Model& md) { return infos(md.inputs()); })
      .def_property_readonly("outputs", [](const Model& md) { return infos(md.outputs()); })
      .def_property_readonly("nodes", [](const Model& md) {
        py::list out;
        for (const ModelNode& n : md.nodes())
          out.append(py::dict("name"_a = n.name, "op"_a = n.op, "inputs"_a = n.inputs, "outputs"_a = n.outputs));
        return out;
      }, "The nodes in execution order, as stored: dicts of name, op, inputs, outputs.")
      .def_property_readonly("task", [](const Model& md) {
        return cli::read_metadata(md, md.origin()).task;
      }, "metadata 'task' as the apps read it: 'classifier', 'generator' or ''.")
      .def_property_readonly("labels", [](const Model& md) {
        return cli::read_metadata(md, md.origin()).labels;
      }, "metadata 'labels', one per class (empty when absent).")
      .def_property_readonly("output_range", [](const Model& md) {
        const cli::AppMetadata meta = cli::read_metadata(md, md.origin());
        return py::make_tuple(meta.range_lo, meta.range_hi);
      }, "metadata 'output.range' as (lo, hi); (-1.0, 1.0) when absent.")
      .def("__repr__", [](const Model& md) {
        return "<infer.Model '" + md.name() + "' from " + md.origin() + ", " +
               std::to_string(md.num_nodes()) + " nodes>";
      });

  py::class_<PySession>(m, "Session")
      .def(py::init([](const Model& model, const std::string& backend, const std::string& precision,
                       int64_t batch, bool autotune, const std::map<std::string, std::string>& kernels,
                       const std::map<std::string, bool>& passes,
                       const std::vector<std::string>& extra_outputs, int device,
                       const std::string& plan_cache) {
             SessionOptions o;
             o.device = device;
             o.plan_cache = plan_cache;
             o.backend = backend;
             o.precision = parse_precision(precision);
             o.batch = batch;
             o.autotune = autotune;
             o.kernels = kernels;
             for (const auto& [name, on] : passes) o.passes.set(name, on);
             o.extra_outputs = extra_outputs;
             py::gil_scoped_release release;
             return new PySession(model, o);
           }),
           "model"_a, "backend"_a = "auto", "precision"_a = "fp32", "batch"_a = 0,
           "autotune"_a = false, "kernels"_a = std::map<std::string, std::string>{},
           "passes"_a = std::map<std::string, bool>{}, "extra_outputs"_a = std::vector<std::string>{},
           "device"_a = -1, "plan_cache"_a = "")
      .def("_run", [](PySession& s, py::args args) { return s.run(args, false); })
      .def("_run_into", [](PySession& s, py::list outs, py::args args) { return s.run_into(outs, args); })
      .def("_run_device", [](PySession& s, py::args args) { return s.run(args, true); })
      .def("_profile", [](PySession& s, int runs, py::args args) {
        if (runs < 1) throw Error("profile: runs must be at least 1, got " + std::to_string(runs));
        std::vector<Tensor> in = args.size() ? s.gather(args) : s.random(1);
        Profile p;
        {
          py::gil_scoped_release release;
          std::lock_guard<std::mutex> lock(s.mutex);
          p = s.session.profile(in, runs);
        }
        return py::make_tuple(p.json(), p.chrome_trace(), p.table());
      })
      .def("random_inputs", [](const PySession& s, int64_t seed) {
        if (seed < 0) throw Error("random_inputs: seed must be >= 0, got " + std::to_string(seed));
        return to_numpy_list(s.random(static_cast<uint64_t>(seed)));
      }, "seed"_a = 1,
      "The inputs `infer --seed SEED` uses without --input: N(0,1) latents for a generator, uniform [-1,1) otherwise.")
      .def("_cpp_run_times", [](PySession& s, int runs, py::args args) {
        // The C++ baseline of bench/python_overhead.py: Session::run alone, timed in C++.
        std::vector<Tensor> in = s.gather(args);
        std::vector<double> seconds;
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(s.mutex);
        for (int i = 0; i < runs; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          std::vector<Tensor> out = s.session.run(in);
          seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return seconds;
      })
      .def_property_readonly("_last_engine_seconds", [](const PySession& s) { return s.last_engine_seconds; })
      .def_property_readonly("model", [](const PySession& s) { return s.model; })
      .def_property_readonly("backend", [](const PySession& s) { return s.session.backend(); })
      .def_property_readonly("batch", [](const PySession& s) { return s.session.batch(); })
      .def_property_readonly("precision", [](const PySession& s) {
        return std::string(precision_name(s.session.precision()));
      })
      .def_property_readonly("device", [](const PySession& s) { return s.session.device(); })
      .def_property_readonly("inputs", [](const PySession& s) { return infos(s.session.inputs()); })
      .def_property_readonly("outputs", [](const PySession& s) { return infos(s.session.outputs()); })
      .def_property_readonly("nodes", [](const PySession& s) {
        py::list out;
        for (const NodeInfo& n : s.session.nodes())
          out.append(py::dict("name"_a = n.name, "op"_a = n.op, "variant"_a = n.variant,
                              "fused"_a = n.fused, "output_shape"_a = shape_tuple(n.output_shape),
                              "workspace_bytes"_a = n.workspace_bytes));
        return out;
      })
      .def_property_readonly("memory", [](const PySession& s) {
        const MemoryReport& r = s.session.memory();
        return py::dict("arena_bytes"_a = r.arena_bytes, "naive_bytes"_a = r.naive_bytes,
                        "lower_bound_bytes"_a = r.lower_bound_bytes,
                        "workspace_bytes"_a = r.workspace_bytes, "weight_bytes"_a = r.weight_bytes,
                        "prepared_bytes"_a = r.prepared_bytes,
                        "device_peak_bytes"_a = r.device_peak_bytes,
                        "device_total_bytes"_a = r.device_total_bytes);
      })
      .def_property_readonly("pass_log", [](const PySession& s) { return s.session.passes(); });

  m.def("load_image", [](const std::string& path, const Model& model) {
    const std::vector<TensorInfo>& in = model.inputs();
    if (in.size() != 1 || in[0].shape.size() != 4)
      throw Error("load_image: model '" + model.name() + "' needs one 4-D NCHW input to take an image");
    const cli::AppMetadata meta = cli::read_metadata(model, model.origin());
    const Shape& s = in[0].shape;
    if (s[1] != 1 && s[1] != 3)
      throw Error("load_image: model input '" + in[0].name + "' has " + std::to_string(s[1]) +
                  " channels (images give 1 or 3)");
    if (s[2] < 1 || s[3] < 1 || s[2] > 65536 || s[3] > 65536)
      throw Error("load_image: model input '" + in[0].name + "' has no usable image size");
    return to_numpy(load_image(path, int(s[1]), int(s[2]), int(s[3]), ImageNormalization{meta.mean, meta.std}));
  }, "path"_a, "model"_a);

  m.def("save_grid", [](const std::string& path, py::handle images, float lo, float hi) {
    Tensor t = to_tensor(images, "save_grid: images");
    if (t.shape.size() != 4 || (t.shape[1] != 1 && t.shape[1] != 3))
      throw Error("save_grid: images must be [N, 1 or 3, H, W], got " + shape_str(t.shape));
    if (!(lo < hi)) throw Error("save_grid: need lo < hi");
    py::gil_scoped_release release;
    write_image_grid(path, t, lo, hi);
  }, "path"_a, "images"_a, "lo"_a = -1.0f, "hi"_a = 1.0f);

  m.def("_write_text", &write_text);

  m.def("_onnx_convert", [](const std::string& src, const std::string& dst, bool fp16,
                            const std::map<std::string, std::string>& metadata, const std::string& name) {
    onnx_import::ImportOptions o;
    o.name = name;
    o.weight_dtype = fp16 ? DType::F16 : DType::F32;
    for (const auto& kv : metadata) o.metadata.push_back(kv);
    py::gil_scoped_release release;
    ModelBuilder b = onnx_import::import_file(src, o);
    if (!dst.empty()) b.save(dst);
    return Model::from_bytes(b.finish(), dst.empty() ? src : dst);
  });
  m.def("_onnx_supported_ops", []() { return onnx_import::supported_ops(); });

  m.def("_zoo_build", [](const std::string& name, uint64_t seed, int image_size, bool fp16,
                         const std::string& path) {
    zoo::ZooOptions o;
    o.seed = seed;
    o.image_size = image_size;
    o.weight_dtype = fp16 ? DType::F16 : DType::F32;
    py::gil_scoped_release release;
    ModelBuilder b = zoo::build(name, o);
    if (!path.empty()) b.save(path);
    return Model::from_bytes(b.finish(), path.empty() ? "<zoo " + name + ">" : path);
  });
  m.def("_zoo_names", []() { return zoo::names(); });
}
