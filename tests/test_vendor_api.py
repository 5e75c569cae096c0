"""The vendor helpers (backends/vendor.py, issue 22): exact bytes for every element
type, int4 packing, the Unsupported / compile-error decision for text diagnostics, and
the warning for invalid programs declined without compiling."""
import warnings

import numpy as np
import pytest

from conformance.backends import Backend, NoProgram, Unsupported, vendor
from conformance.checking.checker import check_invalid
from conformance.core.case import Case, Signature
from conformance.core.literals import bit_patterns, from_bit_patterns
from conformance.core.types import ALL_ELEMENT_TYPES


@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=lambda t: t.name)
def test_bytes_round_trip_every_type_bit_exactly(et):
    rng = np.random.default_rng(0)
    w = min(et.component.bits, 62)
    raw = rng.integers(0, 1 << w, size=(5,) + ((2,) if et.is_complex else ()),
                       dtype=np.uint64)
    x = from_bit_patterns(raw & np.uint64(1) if et.is_boolean else raw, et)
    data = vendor.to_bytes(x)
    st = vendor.storage(et)
    per = 0.5 if st.packed_int4 else st.raw_dtype.itemsize * st.components
    assert len(data) == int(np.ceil(5 * per))
    back = vendor.from_bytes(data, et, (5,))
    assert back.dtype == et.dtype and np.array_equal(bit_patterns(back), bit_patterns(x))
    zero_d = x[:1].reshape(())
    assert vendor.from_bytes(vendor.to_bytes(zero_d), et, ()).shape == ()


def test_int4_packing_layout():
    x = np.array([-8, 7, -1], vendor.storage("si4").dtype)
    assert vendor.pack_int4(x) == bytes([0x78, 0x0F])
    assert vendor.to_bytes(x, pack4=False) == bytes([0x8, 0x7, 0xF])
    u = np.array([1, 2, 15, 0], vendor.storage("ui4").dtype)
    assert vendor.pack_int4(u) == bytes([0x21, 0x0F])
    with pytest.raises(ValueError, match="fewer than"):
        vendor.unpack_int4(b"\x00", "si4", (3,))


def test_i1_is_one_byte_per_element_and_storage_facts():
    assert vendor.to_bytes(np.array([True, False, True])) == b"\x01\x00\x01"
    assert vendor.from_bytes(b"\x00\x02", "i1", (2,)).tolist() == [False, True]
    assert vendor.storage("f8E5M2").raw_dtype == np.uint8
    assert vendor.storage("complex<f64>").components == 2
    with pytest.raises(ValueError, match="expected 8"):
        vendor.from_bytes(b"\x00" * 4, "f32", (2,))


VALID = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<2xf32>"])
INVALID = Signature.make("add", ["tensor<2xf32>"] * 2, ["tensor<3xf32>"], invalid="C1")


def test_compile_error_decides_from_text():
    e = RuntimeError("error: failed to legalize operation 'stablehlo.cbrt'")
    got = vendor.compile_error(VALID, e, [r"failed to legalize"])
    assert isinstance(got, Unsupported) and got.compiled and "cbrt" in str(got)
    assert vendor.compile_error(INVALID, e, [r"failed to legalize"]) is e   # a rejection
    assert vendor.compile_error(VALID, e, [r"not implemented"]) is e      # a backend error


def test_module_text_is_plain_text_with_main_and_no_program_is_unsupported():
    text = vendor.module_text(VALID)
    assert f"func.func public @{vendor.ENTRY}(%arg0: tensor<2xf32>" in text
    bad = Signature.make("sort", ["tensor<2xf32>"], ["tensor<2xf32>"],
                         {"dimension": 0, "is_stable": True}, regions=("not a region",))
    with pytest.raises(NoProgram):
        vendor.module_text(bad)
    assert issubclass(NoProgram, Unsupported)


class DeclinesByType(Backend):
    """A realistic adapter bug: it refuses f32 by type, before compiling anything, even
    for an invalid program (si32 it compiles)."""
    name = "declines-by-type"

    def compile(self, sig):
        if sig.input_leaves[0].element_type.name == "f32":
            raise Unsupported("f32 is not supported")
        return lambda xs: [np.add(*xs)]


class CompilerDeclines(Backend):
    name = "compiler-declines"

    def run(self, case):
        raise Unsupported("the compiler declined it", compiled=True)


class FrontEnd(DeclinesByType):
    name = "front-end"
    compiles_invalid = False


def test_declining_an_invalid_program_untried_warns_once():
    case = Case(INVALID, (np.zeros(2, np.float32), np.zeros(2, np.float32)))
    backend = DeclinesByType()
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # the op was never compiled: no warning
        assert check_invalid(backend, case)[0] == "unsupported"
    from conformance.checking.checker import SignatureCheck
    from conformance.specs import load_spec
    si32 = Signature.make("add", ["tensor<2xi32>"] * 2, ["tensor<2xi32>"])
    SignatureCheck(load_spec("add"), si32, [backend]).compile()   # add compiles
    assert backend.compiled_ops == {"add"}
    with pytest.warns(vendor.NeverCompiledWarning, match="declines-by-type"):
        outcome, reason = check_invalid(backend, case)
    assert outcome == "unsupported" and "without compiling" in reason
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_invalid(backend, case)[1] == reason       # warned once per backend
        # another instance has compiled nothing (what ran before in the process is not
        # its history)
        assert check_invalid(DeclinesByType(), case) == ("unsupported", "f32 is not supported")
        for b in (CompilerDeclines(), FrontEnd()):
            vendor.note_compiled(b, "add")
            assert check_invalid(b, case)[0] == "unsupported"
        valid = Case(VALID, case.inputs)
        assert check_invalid(backend, valid)[0] == "unsupported"
        backend.clear_cache()              # what it implements is no cache: it stays
        assert check_invalid(backend, case)[1] == reason


def test_the_compiled_flag_crosses_the_process_boundary(tmp_path):
    from conformance.checking.isolation import IsolatedBackend
    b = IsolatedBackend("tests.test_vendor_api:CompilerDeclines")
    try:
        with pytest.raises(Unsupported) as e:
            b.run(Case(INVALID, (np.zeros(2, np.float32), np.zeros(2, np.float32))))
        assert e.value.compiled is True
    finally:
        b.close()
