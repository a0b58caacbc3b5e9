// Stands in for the compiler's cuda_runtime.h, which nccl.h includes: the runtime API is all it uses.
#pragma once
#include <cuda_runtime_api.h>
