// The engine version, set by CMake from project(VERSION).
#include "infer/version.h"

namespace infer {
const char* version() { return INFER_VERSION; }
}  // namespace infer
