// Kept while branches written against the old path are merged: the kernel interface is the public
// infer/kernel.h (engine/include/infer/kernel.h). New code includes that.
#pragma once

#include "infer/kernel.h"
