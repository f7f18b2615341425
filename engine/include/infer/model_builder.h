// infer::ModelBuilder: writes valid .fb model files from code (the model zoo, tests, importers).
// Tensors are referred to by the ids it returns. Every node's output shape is inferred as it is added,
// so a builder that returns a model has produced a file the loader accepts. Weights are 64-byte aligned.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "infer/ops.h"

namespace infer {

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name);
  ~ModelBuilder();
  ModelBuilder(ModelBuilder&&) noexcept;
  ModelBuilder& operator=(ModelBuilder&&) noexcept;

  void set_description(std::string text);
  void set_producer(std::string text);
  void set_metadata(const std::string& key, std::string value);

  // A model input; shape with a leading -1 for the batch dimension.
  int input(const std::string& name, Shape shape);
  // A constant (weights); `data` holds shape_numel(shape) floats, stored as `dtype`.
  int constant(const std::string& name, Shape shape, const std::vector<float>& data,
               DType dtype = DType::F32);
  // A node; inputs are tensor ids (data first, then constants). Returns the output tensor id, which is
  // named `output_name`, or after the node when that is empty. Node names are unique among nodes,
  // tensor names among tensors. Throws infer::Error if the parameters or input shapes are invalid.
  int node(const std::string& name, OpParams params, std::vector<int> inputs,
           const std::string& output_name = "");
  void output(int tensor);

  // The shape of a tensor added so far (leading -1 for batch).
  const Shape& shape(int tensor) const;

  std::vector<uint8_t> finish() const;     // the serialized file
  void save(const std::string& path) const;  // finish() to a file; Error if it cannot be written

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer
