// The GPU path's host-side logic: finding and loading libraries, and mapping reductions onto
// NCCL. Runs on any machine; nothing here needs a GPU.
#include <cstdint>
#include <cstring>

#include <doctest/doctest.h>
#include "fusion_planner.h"
#include "gpu/copy_kernel_args.h"
#include "gpu/dynamic_library.h"
#include "gpu/gpu_runtime.h"
#include "gpu/nccl_mapping.h"

using namespace hvd;
using namespace hvd::gpu;

namespace hvd::gpu {
extern const char kBatchedCopyPtx[];
}

static OpSpec spec(ReduceOp op, DataType t, double pre = 1.0, double post = 1.0) {
  OpSpec s;
  s.reduce = op;
  s.dtype = t;
  s.prescale = pre;
  s.postscale = post;
  return s;
}

TEST_CASE("gpu_candidates_search_dirs_then_the_system_loader") {
  auto c = library_candidates({"libm.so.6", "libnope.so.1"}, {"/nonexistent", "/lib/x86_64-linux-gnu"}, "");
  CHECK(c.back() == "libnope.so.1");
  CHECK(c[c.size() - 2] == "libm.so.6");
  for (const auto& p : c) CHECK(p.rfind("/nonexistent", 0) != 0);  // only files that exist
}

TEST_CASE("gpu_override_replaces_the_search") {
  auto file = library_candidates({"libnccl.so.2"}, {"/lib"}, "/opt/x/libnccl.so.2");
  CHECK(file == std::vector<std::string>{"/opt/x/libnccl.so.2"});
  auto dir = library_candidates({"libnccl.so.2", "libnccl.so"}, {"/lib"}, "/tmp");
  CHECK(dir == std::vector<std::string>{"/tmp/libnccl.so.2", "/tmp/libnccl.so"});
}

TEST_CASE("gpu_dynamic_library_loads_and_reports_failures") {
  std::string err;
  auto none = DynamicLibrary::open_first({"/nonexistent/libfoo.so", "libfoo-not-there.so.9"}, &err);
  CHECK(!none);
  CHECK(err.find("/nonexistent/libfoo.so") != std::string::npos);
  CHECK(err.find("libfoo-not-there.so.9") != std::string::npos);
  auto m = DynamicLibrary::open_first({"libfoo-not-there.so.9", "libm.so.6"}, &err);
  CHECK(static_cast<bool>(m));
  CHECK(m.path().find("libm.so.6") != std::string::npos);
  CHECK(m.symbol("cos") != nullptr);
  CHECK(m.symbol("no_such_symbol_here") == nullptr);
}

TEST_CASE("gpu_runtime_reports_why_it_did_not_load") {
  Runtime rt;
  SearchPaths p;
  p.cuda_override = "/nonexistent/libcudart.so.12";
  p.nccl_override = "/nonexistent/dir/";
  GpuStatus s = rt.load(p);
  CHECK(!s.cuda.loaded);
  CHECK(!s.nccl.loaded);
  CHECK(!s.cuda_ready());
  CHECK(!s.nccl_ready());
  CHECK(s.cuda.error.find("JUPYTER_HVD_CUDART_LIB=/nonexistent/libcudart.so.12") != std::string::npos);
  CHECK(s.nccl.error.find("libnccl not found") != std::string::npos);
  // A library without the CUDA symbols is reported as such, not as loaded.
  p.cuda_override = "libm.so.6";
  s = rt.load(p);
  CHECK(!s.cuda.loaded);
  CHECK(s.cuda.error.find("lacks symbols: cudaRuntimeGetVersion") != std::string::npos);
}

TEST_CASE("gpu_sum_and_average_fold_scaling_into_one_premultiplier") {
  auto r = nccl_reduction(spec(ReduceOp::Sum, DataType::Float32), 4, 22703);
  REQUIRE(r.error.empty());
  CHECK(r.op == ncclSum);
  CHECK(!r.pre_mul_sum);
  CHECK(r.type == ncclFloat32);
  r = nccl_reduction(spec(ReduceOp::Sum, DataType::Float16, 0.5, 3.0), 4, 22703);
  REQUIRE(r.error.empty());
  CHECK(r.pre_mul_sum);
  CHECK(r.factor == 1.5);
  CHECK(r.type == ncclFloat16);
  r = nccl_reduction(spec(ReduceOp::Average, DataType::Float64, 2.0), 4, 22703);
  REQUIRE(r.error.empty());
  CHECK(r.pre_mul_sum);
  CHECK(r.factor == 0.5);
  r = nccl_reduction(spec(ReduceOp::Average, DataType::Float32), 1, 22703);
  REQUIRE(r.error.empty());
  CHECK(!r.pre_mul_sum);
  CHECK(r.op == ncclSum);
  r = nccl_reduction(spec(ReduceOp::Average, DataType::Int32), 3, 22703);
  REQUIRE(r.error.empty());
  CHECK(r.op == ncclAvg);
  CHECK(!r.pre_mul_sum);
  r = nccl_reduction(spec(ReduceOp::Average, DataType::Float32), 2, 21000);  // no PreMulSum before 2.11
  REQUIRE(r.error.empty());
  CHECK(r.op == ncclAvg);
  CHECK(!r.pre_mul_sum);
  r = nccl_reduction(spec(ReduceOp::Sum, DataType::Float32, 2.0), 2, 21000);
  CHECK(!r.error.empty());
}

TEST_CASE("gpu_bool_min_max_and_errors") {
  CHECK(nccl_reduction(spec(ReduceOp::Sum, DataType::Bool), 2, 22703).op == ncclMax);
  CHECK(nccl_reduction(spec(ReduceOp::Product, DataType::Bool), 2, 22703).op == ncclMin);
  CHECK(nccl_reduction(spec(ReduceOp::Min, DataType::Bool), 2, 22703).type == ncclUint8);
  CHECK(nccl_reduction(spec(ReduceOp::Max, DataType::Int8), 2, 22703).op == ncclMax);
  CHECK(nccl_reduction(spec(ReduceOp::Product, DataType::Int64), 2, 22703).op == ncclProd);
  CHECK(!nccl_reduction(spec(ReduceOp::Max, DataType::Float32, 2.0), 2, 22703).error.empty());
  CHECK(!nccl_reduction(spec(ReduceOp::Sum, DataType::Int32, 2.0), 2, 22703).error.empty());
  CHECK(!nccl_reduction(spec(ReduceOp::Sum, DataType::BFloat16), 2, 20903).error.empty());
  CHECK(nccl_reduction(spec(ReduceOp::Sum, DataType::BFloat16), 2, 22703).type == ncclBfloat16);
  for (DataType t : {DataType::Int16, DataType::UInt16})  // NCCL has no 16-bit integer type
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
      CHECK(nccl_reduction(spec(op, t), 2, 22703).error.find("NCCL has no 16-bit integer type") != std::string::npos);
}

TEST_CASE("gpu_scaling_needs_sum_or_average_on_every_gpu_path") {
  CHECK(scaling_error(spec(ReduceOp::Max, DataType::Float32, 2.0)).find("need op Sum or Average, not Max") !=
        std::string::npos);
  CHECK(!scaling_error(spec(ReduceOp::Product, DataType::Float16, 1.0, 0.5)).empty());
  CHECK(scaling_error(spec(ReduceOp::Min, DataType::Float32)).empty());
  CHECK(scaling_error(spec(ReduceOp::Sum, DataType::Float32, 2.0)).empty());
  OpSpec bcast = spec(ReduceOp::Max, DataType::Float32, 2.0);
  bcast.op = OpType::Broadcast;  // only reductions scale
  CHECK(scaling_error(bcast).empty());
}

TEST_CASE("gpu_premultiplier_scalar_has_the_tensor_type") {
  auto h = scalar_bytes(DataType::Float16, 0.5);
  uint16_t hv;
  std::memcpy(&hv, h.data(), 2);
  REQUIRE(h.size() == 2);
  CHECK(hv == 0x3800);
  auto b = scalar_bytes(DataType::BFloat16, 2.0);
  uint16_t bv;
  std::memcpy(&bv, b.data(), 2);
  REQUIRE(b.size() == 2);
  CHECK(bv == 0x4000);
  auto d = scalar_bytes(DataType::Float64, 0.25);
  double dv;
  std::memcpy(&dv, d.data(), 8);
  REQUIRE(d.size() == 8);
  CHECK(dv == 0.25);
}

TEST_CASE("gpu_tensors_fuse_only_with_gpu_tensors") {
  auto one = [](const char* n, Memory m) {
    Response r;
    r.spec.memory = m;
    r.names = {n};
    r.cache_ids = {-1};
    return r;
  };
  auto out = plan_fusion({one("a", Memory::Cuda), one("b", Memory::Host), one("c", Memory::Cuda)}, {8, 8, 8}, 1 << 20,
                         1 << 20);
  CHECK(out.size() == 2);
  CHECK(out[0].names == std::vector<std::string>{"a", "c"});
  CHECK(out[1].names == std::vector<std::string>{"b"});
}

TEST_CASE("gpu_embedded_copy_kernel_matches_its_argument_layout") {
  // The PTX was made from kernels/batched_copy.cu with copy_kernel_args.h: its one parameter must be
  // the struct the engine passes, and its block size the one it launches with (make gpu-ptx otherwise).
  const std::string ptx = kBatchedCopyPtx;
  CHECK(ptx.find(".entry jhvd_batched_copy(") != std::string::npos);
  CHECK(ptx.find("jhvd_batched_copy_param_0[" + std::to_string(sizeof(JhvdCopies)) + "]") != std::string::npos);
  CHECK(ptx.find(".maxntid " + std::to_string(JHVD_COPY_THREADS) + ",") != std::string::npos);
}
