// The whole public API of the infer engine in one include. Link infer::engine.
#pragma once

#include "infer/cpu_isa.h"
#include "infer/error.h"
#include "infer/model.h"
#include "infer/model_builder.h"
#include "infer/ops.h"
#include "infer/profile.h"
#include "infer/session.h"
#include "infer/tensor.h"
#include "infer/version.h"
