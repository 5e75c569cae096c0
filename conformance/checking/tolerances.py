"""Tolerance profiles: override the spec YAML's accuracy bounds for a run.

A profile is a YAML mapping from op name to an accuracy table in the spec's own
syntax, e.g.::

    sine:
      f32: {ulp: 8}          # by element type
      complex: {rel_eps: 64} # or by type class
    exponential:
      bf16: {ulp: 2}

Every op and entry is checked when the profile is loaded; a bad one is an error
naming the file and the key.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from conformance.checking.verdicts import UnknownVerdict, check_known
from conformance.specs import SpecError, UnknownOp, load_spec, parse_accuracy, read_yaml
from conformance.core.types import ALL_ELEMENT_TYPES, TYPE_CLASSES, UnknownElementType, element_type


def load_tolerances(path: "str | Path") -> dict[str, dict[str, Any]]:
    """Read and check a tolerance profile; returns {op: accuracy table}."""
    path = Path(path)
    try:
        data = read_yaml(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a text file (not UTF-8)") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping from op name to an accuracy table")
    for op, table in data.items():
        try:
            load_spec(str(op))
        except UnknownOp as e:
            raise SpecError(f"{path}: {op}: {e}") from None
        if not isinstance(table, dict):
            raise SpecError(f"{path}: {op}: expected a mapping from element type to a bound")
        for key, entry in table.items():
            where = f"{path}: {op}.{key}"
            if key in TYPE_CLASSES or key == "default":
                targets = ALL_ELEMENT_TYPES
            else:
                try:
                    targets = (element_type(key),)
                except UnknownElementType as e:
                    raise SpecError(f"{where}: {e}") from None
            for et in targets:
                try:
                    accuracy = parse_accuracy(entry, et, where)
                    check_known(accuracy, where)
                except UnknownVerdict as e:
                    raise SpecError(str(e)) from None
                except (TypeError, ValueError) as e:      # float("x"), float([1])
                    raise SpecError(f"{where}: not a bound: {e}") from None
                if not (0 <= accuracy.bound < math.inf):
                    raise SpecError(f"{where}: the bound must be a number >= 0, got "
                                    f"{accuracy.bound:g}")
    return data
