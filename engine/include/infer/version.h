// The engine's version string (also printed by `infer --version`).
#pragma once

namespace infer {
const char* version();
}
