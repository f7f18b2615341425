// infer::Error: the one exception type the engine throws for bad input (model files, shapes, options)
// and failed devices. The message is one line naming what is wrong (file, node, field) so apps can print
// it as `error: <what()>` and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace infer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace infer
