"""A planted backend for the campaign tests (tests/test_fuzz_cluster.py), loaded as
planted_fuzz:ManyKeys in this process and in worker processes (tests/ on PYTHONPATH):
bugs on several element types and on invalid programs, so that a campaign's corpus has
several distinct keys, met by different draws."""
import numpy as np

from planted import OracleBackend


class ManyKeys(OracleBackend):
    """add of a float type: 1/64 too large where lhs > 1; negate of a signed integer
    type: the input unchanged where it is > 50; invalid add programs: accepted."""

    name = "many-keys"

    def compile(self, sig):
        if sig.invalid and sig.op == "add":
            return lambda inputs: [np.zeros(t.shape, t.element_type.dtype)
                                   for t in sig.result_types]
        inner = super().compile(sig)
        et = sig.input_types[0].element_type if sig.input_types else None
        if et is None or sig.op not in ("add", "negate"):
            return inner
        dtype = np.dtype(et.dtype)

        def run(inputs):
            (out,) = inner(inputs)
            out = np.asarray(out)
            x = np.asarray(inputs[0])
            with np.errstate(all="ignore"):
                if sig.op == "add" and dtype.kind == "f":
                    out = np.where(x > 1, out * dtype.type(1 + 2 ** -6), out).astype(dtype)
                elif sig.op == "negate" and dtype.kind == "i":
                    out = np.where(x > 50, x, out).astype(dtype)
            return [out]
        return run
