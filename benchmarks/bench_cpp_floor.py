"""The C++ floor of a PrivateUse1 backend on this machine (issue 33 item 3's anchor), measured, not modeled.

Builds (g++ against the installed CPU torch, ~1 min, cached in ``$TMPDIR/trn_cpp_floor``) a minimal
host-backed PrivateUse1 backend registered the way PyTorch's ``torch_openreg``
(test/cpp_extensions/open_registration_extension, OpenRegMinimal.cpp) registers itself: C++ ``empty``,
``empty_strided``, ``as_strided``, ``view``, ``_copy_from(_and_resize)``, ``_local_scalar_dense`` and a boxed
``at::native::cpu_fallback`` for every other op (so ``add`` copies its inputs to the CPU and its result back,
as openreg's does). With ``--direct-add`` it also registers a direct ``add.Tensor`` computing on host aliases
(what a C++ per-op path of the simulator would do). No accounting of any kind: this is the floor a C++ path
starts from. Runs in its own process without trn_notebook (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``: one
PrivateUse1 backend per process). Ratios are per-op CPU time (``time.process_time``, 1 thread) against CPU
eager, so the shared machine's load does not enter them.

Run: ``python benchmarks/bench_cpp_floor.py [--direct-add]``
"""

from __future__ import annotations

import os
import sys

os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import statistics
import tempfile
import time
import types

import torch
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <cstdlib>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/TensorShape.h>
#include <ATen/native/Resize.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <cstring>

namespace {
struct MiniAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    return {p, p, &c10::free_cpu, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }
  void copy_data(void* d, const void* s, std::size_t n) const override { std::memcpy(d, s, n); }
};
MiniAllocator g_alloc;
const c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);

at::Tensor host(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), at::TensorOptions().dtype(t.dtype()).device(at::kCPU));
}
at::Tensor empty_mf(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                    std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat> mf) {
  return at::detail::empty_generic(size, &g_alloc, ks, c10::dtype_or_default(dtype), mf);
}
at::Tensor empty_st(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                    std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &g_alloc, ks, c10::dtype_or_default(dtype));
}
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> off) {
  return at::native::as_strided_tensorimpl(self, size, stride, off);
}
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  auto s = self.is_cpu() ? self : host(self);
  auto d = dst.is_cpu() ? dst : host(dst);
  d.copy_(s);
  return dst;
}
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_impl_cpu_(dst.unsafeGetTensorImpl(), self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}
at::Scalar local_scalar(const at::Tensor& self) { return host(self).item(); }
at::Tensor add_direct(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  at::Tensor out = at::detail::empty_generic(at::infer_size(a.sizes(), b.sizes()), &g_alloc, ks,
                                       at::result_type(a, b), std::nullopt);
  at::Tensor h = host(out);
  at::add_out(h, host(a), host(b), alpha);
  return out;
}
void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { at::native::cpu_fallback(op, stack); }
}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_alloc);
C10_REGISTER_GUARD_IMPL(PrivateUse1, c10::impl::NoOpDeviceGuardImpl<c10::DeviceType::PrivateUse1>);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_mf);
  m.impl("empty_strided", empty_st);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  if (std::getenv("MINIREG_DIRECT_ADD")) m.impl("add.Tensor", add_direct);
  m.impl("_copy_from", copy_from);
  m.impl("_local_scalar_dense", local_scalar);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
}
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}
"""


def per_call(fn, n: int = 20_000) -> float:
    """CPU seconds per call of ``fn`` (after one warm-up call)."""
    fn()
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n


def main() -> None:
    if "--direct-add" in sys.argv:
        os.environ["MINIREG_DIRECT_ADD"] = "1"
    build = os.path.join(tempfile.gettempdir(), "trn_cpp_floor")
    os.makedirs(build, exist_ok=True)
    load_inline("trn_cpp_floor", cpp_sources=[SOURCE], build_directory=build, is_python_module=False)
    torch.set_num_threads(1)
    torch.utils.rename_privateuse1_backend("minireg")
    mod = types.ModuleType("minireg")
    mod.is_available = lambda: True  # type: ignore[attr-defined]
    mod.device_count = lambda: 1  # type: ignore[attr-defined]
    mod.current_device = lambda: 0  # type: ignore[attr-defined]
    torch._register_device_module("minireg", mod)
    a, b = torch.ones(4, 4), torch.ones(4, 4)
    da, db = a.to("minireg"), b.to("minireg")
    assert torch.equal((da + db).cpu(), a + b)
    add, view = [], []
    for _ in range(7):  # interleaved rounds
        add.append(per_call(lambda: da + db) / per_call(lambda: a + b))
        view.append(per_call(lambda: da.view(16)) / per_call(lambda: a.view(16)))
    kind = "direct add.Tensor on host aliases" if "--direct-add" in sys.argv else "openreg-style cpu_fallback add"
    print(
        f"C++ PrivateUse1 floor ({kind}): add 4x4 {statistics.median(add):.2f}x CPU [{min(add):.2f}-{max(add):.2f}], "
        f"view {statistics.median(view):.2f}x (median of 7 interleaved rounds, CPU time; load {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
