"""Which arithmetic a model runs in: bfloat16 only where the hardware makes it fast, float32 elsewhere.

bf16 halves the bytes every matmul and every decode step reads, but a CPU without native bf16 instructions
(AVX512-BF16 or AMX) emulates it far slower than float32, so "auto" must look before it leaps. Shared by
the HF backend (inference) and the trainers (autocast), so both decide alike.
"""

from __future__ import annotations

from pathlib import Path

PRECISIONS = ("auto", "float32", "bf16")
#: /proc/cpuinfo flags that mean native bf16 matmuls.
_CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def _cpuinfo_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def cpu_has_fast_bf16() -> bool:
    """True when this CPU has native bf16 matmuls (torch's cpuinfo probe, or the kernel's flags)."""
    import torch

    probes = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
    if any(probe is not None and probe() for probe in probes):
        return True
    return bool(_cpuinfo_flags() & _CPU_BF16_FLAGS)


def fast_bf16(device: str) -> bool:
    """Whether bf16 arithmetic is native (fast) on `device` ("cpu", "cuda", "cuda:0", ...)."""
    import torch

    if str(device).startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if str(device).startswith("cpu"):
        return cpu_has_fast_bf16()
    return False


def resolve_precision(precision: str, device: str) -> str:
    """"float32" or "bf16" for a setting of auto / float32 / bf16 on `device`."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        return "bf16" if fast_bf16(device) else "float32"
    return precision
