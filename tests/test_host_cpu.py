"""The host's bf16 conversion instructions decide whether XLA CPU flushes a bf16 subnormal
it only moves (backends/host_cpu.py): backends report them in describe(), and the shipped
entries for that flush apply only where the host has them."""
import subprocess
import sys

import pytest

from backends.host_cpu import bf16_conversion, cpu_flags
from conformance.apps.expectations import load_expectations, resolve_expectations

CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 fma\n"
CPUINFO_PLAIN = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f fma\n"


def test_flags_are_read_from_cpuinfo():
    assert {"avx512_bf16", "avx2"} <= cpu_flags(CPUINFO)
    assert cpu_flags("no flags line here") == set()


def test_bf16_conversion_names_the_instructions_or_none():
    assert bf16_conversion(CPUINFO, xla_flags="") == "avx512_bf16"
    assert bf16_conversion(CPUINFO_PLAIN, xla_flags="") == "none"


def test_an_isa_cap_below_bf16_means_none():
    assert bf16_conversion(CPUINFO, xla_flags="--xla_cpu_max_isa=AVX2") == "none"
    assert bf16_conversion(CPUINFO, xla_flags="--xla_cpu_max_isa=avx512") == "none"
    assert bf16_conversion(CPUINFO, xla_flags="--xla_cpu_max_isa=AVX512_BF16") == "avx512_bf16"


@pytest.mark.parametrize("backend", ["jax", "xla"])
def test_cpu_backends_describe_the_host(backend):
    from backends import get_backend
    assert get_backend(backend).describe()["cpu_bf16"] == bf16_conversion()


@pytest.mark.parametrize("name", ["jax-cpu", "xla-cpu"])
def test_the_pad_flush_entry_applies_only_on_hosts_that_convert_in_hardware(name):
    entries = [e for e in load_expectations(resolve_expectations(name)).entries
               if e.op == "pad" and e.cls == "subnormal_flush"]
    assert len(entries) == 1
    (e,) = entries
    host = {"platform": "cpu", "cpu_bf16": "avx512_bf16"}
    assert e.matches(name.split("-")[0], host, "pad", "subnormal_flush", "bf16")
    assert not e.matches(name.split("-")[0], {**host, "cpu_bf16": "none"}, "pad",
                         "subnormal_flush", "bf16")


PAD = """
import jax, jax.numpy as jnp, numpy as np, ml_dtypes
from jax import lax
x = jnp.zeros((3, 4, 1), jnp.bfloat16)
p = jnp.asarray(np.array(0x8001, np.uint16).view(ml_dtypes.bfloat16))
r = jax.jit(lambda x, p: lax.pad(x, p, [(0, 2, 0), (-3, -1, 1), (-1, 1, 1)]))(x, p)
print(sorted({int(v) for v in np.asarray(r).view(np.uint16).ravel()}))
"""


def _padded(xla_flags: str) -> str:
    import os
    env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", PAD], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_xla_flushes_a_moved_bf16_subnormal_exactly_where_describe_says():
    """The fact the entries rest on (jaxlib 0.10.2): capped below AVX512_BF16 the padding
    value 0x8001 is kept; uncapped it is flushed to 0x8000 iff the host has the
    instruction."""
    assert _padded("--xla_cpu_max_isa=AVX2") == str([0x8001])
    expected = [0x8000] if "avx512_bf16" in bf16_conversion(xla_flags="") else [0x8001]
    assert _padded("") == str(expected)


@pytest.mark.parametrize("name", ["jax-cpu", "xla-cpu"])
def test_the_gather_nan_entry_applies_only_on_hosts_that_convert_in_software(name):
    """With AVX512_BF16 XLA keeps the signalling NaN a gather moves (measured at default
    depth: gather bf16 passes there, and quiets 0x7F81 under --xla_cpu_max_isa=AVX2)."""
    (e,) = [e for e in load_expectations(resolve_expectations(name)).entries
            if e.op == "gather" and e.cls == "nan" and "bf16" in e.element_types]
    backend = name.split("-")[0]
    assert e.matches(backend, {"platform": "cpu", "cpu_bf16": "none"}, "gather", "nan", "bf16")
    assert not e.matches(backend, {"platform": "cpu", "cpu_bf16": "avx512_bf16"}, "gather",
                         "nan", "bf16")
