"""What of the host CPU changes XLA CPU's numerics, for backends' describe().

XLA on CPU converts bf16 through f32. Where the host has a bf16 conversion instruction
(AVX512_BF16's VCVTNEPS2BF16) and XLA may use it, the conversion flushes subnormals and
keeps a NaN's payload (0x8001 -> 0x8000, 0x7F81 -> 0x7FC1); without it XLA rounds in
software (0x8001 kept, 0x7F81 -> 0x7FC0). Measured with jaxlib 0.10.2: `lax.pad` of a bf16
tensor with negative edge padding and a subnormal padding value flushes it on an
AVX512_BF16 host and not under ``XLA_FLAGS=--xla_cpu_max_isa=AVX2``. Expectation entries
for such findings match ``when: {cpu_bf16: avx512_bf16}``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

#: the x86 feature flags (as /proc/cpuinfo names them) of bf16 conversion instructions
BF16_CONVERSION_FLAGS = ("avx512_bf16", "amx_bf16", "avx_ne_convert")
#: xla_cpu_max_isa values that still allow them
_ISA_WITH_BF16 = ("AVX512_BF16", "AMX", "AVX_NE_CONVERT")


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The host's CPU feature flags (Linux's /proc/cpuinfo; empty where unreadable)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    m = re.search(r"^flags\s*:(.*)$", cpuinfo, re.MULTILINE)
    return set(m.group(1).split()) if m else set()


def bf16_conversion(cpuinfo: str | None = None, xla_flags: str | None = None) -> str:
    """The bf16 conversion instructions XLA CPU may use here, space-separated, or 'none'
    (none on the host, or ``--xla_cpu_max_isa`` caps XLA below them)."""
    have = [f for f in BF16_CONVERSION_FLAGS if f in cpu_flags(cpuinfo)]
    flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    cap = re.search(r"--xla_cpu_max_isa=(\S+)", flags)
    if cap and not cap.group(1).upper().startswith(_ISA_WITH_BF16):
        have = []
    return " ".join(have) or "none"
