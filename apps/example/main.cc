// infer-example: loads a model, runs it once at batch 1 on seeded random input and prints each output's
// shape and first values. Uses only the public API (<infer/infer.h>), so it doubles as the smallest
// program a user of the installed package can write, and as the package test's client.
#include <infer/infer.h>

#include <cstdio>
#include <exception>
#include <random>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.fb\n", argv[0]);
    return 1;
  }
  try {
    infer::Model model = infer::Model::load(argv[1]);
    infer::SessionOptions options;
    options.batch = 1;
    infer::Session session(model, options);

    // One tensor per model input, in the session's (batch-fixed) shape, uniform in [-1, 1).
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    std::vector<infer::Tensor> inputs;
    for (const infer::TensorInfo& info : session.inputs()) {
      infer::Tensor t(info.shape);
      for (float& x : t.data) x = uniform(rng);
      inputs.push_back(std::move(t));
    }

    std::vector<infer::Tensor> outputs = session.run(inputs);
    std::printf("model %s on %s: %zu output(s)\n", model.name().c_str(), session.backend().c_str(),
                outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const infer::Tensor& out = outputs[i];
      std::printf("output %zu '%s' shape %s:", i, session.outputs()[i].name.c_str(),
                  infer::shape_str(out.shape).c_str());
      for (size_t j = 0; j < out.data.size() && j < 8; ++j) std::printf(" %.5g", out.data[j]);
      std::printf("\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
