// The --kernel choices of infer and infer-bench: "op=variant" (every node of the op) or
// "op:node=variant" (one node by name), turned into SessionOptions::kernels. Both sides must be
// non-empty and an op or node may be named once.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace infer::cli {

// "" when `text` is a well-formed choice, else the usage message (CLI11 validators return it).
std::string check_kernel_choice(const std::string& text);

// The choices as SessionOptions::kernels; infer::Error naming a key given twice.
std::map<std::string, std::string> kernel_choice_map(const std::vector<std::string>& choices);

}  // namespace infer::cli
