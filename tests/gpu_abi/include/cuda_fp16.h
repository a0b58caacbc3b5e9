// Stands in for the compiler's cuda_fp16.h, which nccl.h includes for device code only.
#pragma once
