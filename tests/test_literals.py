"""Literals and bit patterns: exact round trips for every element type."""
import numpy as np
import pytest

from conformance.generators import special_values
from conformance.core.literals import LiteralError, decode, encode, from_literal, to_literal
from conformance.core.types import ALL_ELEMENT_TYPES, TensorType


@pytest.mark.parametrize("et", ALL_ELEMENT_TYPES, ids=lambda t: t.name)
def test_bits_round_trip_special_values(et):
    x = special_values(et)
    y = decode(encode(x))
    assert y.dtype == x.dtype and y.shape == x.shape
    assert encode(y)["bits"] == encode(x)["bits"]


def test_readable_literals_keep_signed_zero_and_specials():
    x = from_literal([0.0, "-0.0", "nan", "-inf", "0x7F800000"], "tensor<5xf32>")
    assert np.signbit(x[1]) and not np.signbit(x[0])
    assert np.isnan(x[2]) and x[3] == -np.inf and x[4] == np.inf
    assert to_literal(x) == [0.0, "-0.0", "nan", "-inf", "inf"]


def test_complex_literal_pairs():
    x = from_literal([[1.0, 2.0], [3.0, "-0.0"]], "tensor<2xcomplex<f32>>")
    assert x[0] == 1 + 2j and np.signbit(x[1].imag)


def test_int4_and_bf16_values():
    x = from_literal([-8, 7], "tensor<2xsi4>")
    assert x.astype(np.int64).tolist() == [-8, 7]
    with pytest.raises(LiteralError, match="out of range"):
        from_literal([8], "tensor<1xsi4>")
    b = from_literal([1.00390625], "tensor<1xbf16>")   # exactly halfway: ties to even -> 1.0
    assert float(b[0]) == 1.0


def test_shape_mismatch_is_reported():
    with pytest.raises(LiteralError, match="expected 2 items"):
        from_literal([1, 2, 3], "tensor<2xsi32>")
