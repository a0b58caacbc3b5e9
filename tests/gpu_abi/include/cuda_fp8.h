// Stands in for the compiler's cuda_fp8.h, which nccl.h includes for device code only.
#pragma once
