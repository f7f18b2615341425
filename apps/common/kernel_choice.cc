// The --kernel choices of infer and infer-bench (kernel_choice.h).
#include "kernel_choice.h"

#include "infer/error.h"

namespace infer::cli {

std::string check_kernel_choice(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size() || text.find('=', eq + 1) != std::string::npos)
    return "expected op=variant or op:node=variant (e.g. conv_transpose2d=reference), got '" + text + "'";
  return "";
}

std::map<std::string, std::string> kernel_choice_map(const std::vector<std::string>& choices) {
  std::map<std::string, std::string> kernels;
  for (const std::string& choice : choices) {
    const size_t eq = choice.find('=');
    if (!kernels.emplace(choice.substr(0, eq), choice.substr(eq + 1)).second)
      throw Error("'" + choice.substr(0, eq) + "' given twice");
  }
  return kernels;
}

}  // namespace infer::cli
