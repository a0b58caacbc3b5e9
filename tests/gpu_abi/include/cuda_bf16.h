// Stands in for the compiler's cuda_bf16.h, which nccl.h includes for device code only.
#pragma once
