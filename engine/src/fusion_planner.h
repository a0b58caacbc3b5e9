// Groups tensors that are ready together into fused responses, up to a byte threshold.
#pragma once

#include <cstdint>
#include <vector>

#include "types.h"

namespace hvd {

// Splits `ready` (validated single-tensor responses in ready order, with their byte sizes)
// into responses: allreduces with the same op, dtype, process set and scaling share one
// response while their total stays within `threshold` bytes (0 disables fusion); a group stays
// carried (Response::carried: each tensor's block, in order) while all of its tensors are. Tensors of
// more than `max_tensor` bytes run alone, reduced in place: on a host, copying them through the
// fusion buffer costs more memory traffic than one more collective call saves. The first
// tensor of each group keeps its place in the order, so every rank sees the same sequence.
std::vector<Response> plan_fusion(std::vector<Response> ready, const std::vector<int64_t>& bytes,
                                  int64_t threshold, int64_t max_tensor);

}  // namespace hvd
