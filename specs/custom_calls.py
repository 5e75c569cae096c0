"""custom_call targets a vendor registers, so that the suite checks them like built-in ops.

003 "### custom_call" leaves what a call does to the implementation ("Encapsulates an
implementation-defined operation `call_target_name`"). The suite checks what the spec
fixes (the attributes' types, the operand and result types, has_side_effect,
api_version) for every target; a target's *values* it checks only where someone told it
what they are: a :class:`CustomCallTarget` with an oracle function.

Two ways to register one (both give the same checks):

- Python: ``register_target(CustomCallTarget(...))`` or the decorator
  :func:`custom_call_target` on the oracle function, before the run plans its cases
  (a plugin module, a conftest.py, a script that calls ``conformance.apps.runner.run``);
- an entry point in the group ``conformance.custom_calls`` (pyproject.toml:
  ``[project.entry-points."conformance.custom_calls"] my_target =
  "my_pkg.targets:TARGET"``): a CustomCallTarget, a list of them, or a function of no
  arguments returning either. Entry points reach every process of a run (``--jobs``).

While no target is registered, custom_call's cases use the suite's placeholder targets
(:data:`PLACEHOLDERS`: one pure, one with side effects threading a token) and are
checked at the signature level only: valid programs must verify, invalid ones must be
rejected; no backend here runs them (XLA has no such target, the interpreter none at
all), and their oracle says that it has no values for them. Their contract (types, side
effect) is the suite's declaration, so that every rule of custom_call has invalid cases;
with a registered target those cases test what the vendor's backend knows.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
from typing import Any, Callable, Sequence

#: the entry point group vendors register targets in
ENTRY_POINT_GROUP = "conformance.custom_calls"
#: the placeholder target name of signature-level cases (no values checked)
UNREGISTERED = "conformance.unregistered_target"
#: ... and of signature-level calls with side effects (a token in, a token out)
UNREGISTERED_EFFECT = "conformance.unregistered_effect"


@dataclasses.dataclass(frozen=True)
class CustomCallTarget:
    """A custom call target and what the suite needs to check it.

    - ``oracle(inputs, attributes) -> results``: the reference, numpy arrays in and out
      (``attributes`` as the signature has them: call_target_name, backend_config, ...);
    - ``types(element_type, shape) -> (input types, result types)``: the operand and
      result types of one call the target accepts, for an element type of
      ``element_types`` and a drawn shape (a list of up to 3 ints); types as text
      (``"tensor<2x3xf32>"``) or conformance.core.types values;
    - ``has_side_effect``: the target has side effects, so a call must say
      has_side_effect = true (a call of a side-effect-free target may say either);
    - ``api_versions``: the API versions it may be called with (0-3: 003's
      backend_config is a string, and API_VERSION_TYPED_FFI takes a dictionary);
    - ``backend_config``: the string every call passes;
    - ``accepts(input types, result types) -> bool``: whether a call's types are ones the
      target takes (the invalid cases of C2 change one type); by default, those
      ``types`` gives for the element type and shape of the first input (or result), so
      ``types`` should put a tensor of the drawn shape first, or give ``accepts``.
    """

    name: str
    oracle: Callable[[Sequence[Any], dict], Sequence[Any]]
    types: Callable[[str, list], tuple]
    element_types: tuple[str, ...] = ("f32",)
    has_side_effect: bool = False
    api_versions: tuple[int, ...] = (1,)
    backend_config: str = ""
    accepts: Callable[[list, list], bool] | None = None


def _identity(inputs, attributes):
    return [x.copy() for x in inputs]


#: the target of 003's custom_call example ("foo"): the suite defines it as the identity
#: so that the example has values; never drawn for generated cases, and a vendor's own
#: "foo" replaces it
EXAMPLE_TARGETS = {"foo": CustomCallTarget(
    "foo", _identity, lambda et, shape: ([f"tensor<{''.join(f'{d}x' for d in shape)}{et}>"],
                                         [f"tensor<{''.join(f'{d}x' for d in shape)}{et}>"]),
    element_types=("f32",), backend_config="bar")}

_REGISTERED: dict[str, CustomCallTarget] = dict(EXAMPLE_TARGETS)
_ENTRY_POINTS_LOADED = False


class TargetError(ValueError):
    """A malformed target registration (one line: which target, what is wrong)."""


def register_target(target: CustomCallTarget, *, replace: bool = False) -> CustomCallTarget:
    """Register ``target`` (a name registered twice is an error unless ``replace``)."""
    if not isinstance(target, CustomCallTarget):
        raise TargetError(f"custom call target: expected a CustomCallTarget, got "
                          f"{type(target).__name__}")
    if not target.name or target.name in (UNREGISTERED, UNREGISTERED_EFFECT):
        raise TargetError(f"custom call target: the name {target.name!r} is not allowed")
    bad = [v for v in target.api_versions if v not in (0, 1, 2, 3)]
    if bad or not target.api_versions:
        raise TargetError(f"custom call target {target.name}: api_versions {bad or '()'} "
                          "(0 to 3: 003's backend_config is a string)")
    from conformance.core.types import element_type
    for t in target.element_types:
        element_type(t)                 # an unknown name is a clear error here
    if target.name in _REGISTERED and not replace and \
            _REGISTERED[target.name] is not EXAMPLE_TARGETS.get(target.name):
        raise TargetError(f"custom call target {target.name} is registered twice")
    _REGISTERED[target.name] = target
    _changed()
    return target


_GENERATION = [0]


def _changed() -> None:
    _GENERATION[0] += 1


def generation() -> int:
    """Bumped whenever the registered targets change (caches of rules read it)."""
    _load_entry_points()
    return _GENERATION[0]


def stock() -> bool:
    """Whether exactly the shipped example targets are registered (so custom_call's
    draws are the same in every process: what the draw cache needs)."""
    _load_entry_points()
    return _REGISTERED.keys() == EXAMPLE_TARGETS.keys() and all(
        _REGISTERED[k] is v for k, v in EXAMPLE_TARGETS.items())


def unregister_target(name: str) -> None:
    _REGISTERED.pop(name, None)
    if name in EXAMPLE_TARGETS:
        _REGISTERED[name] = EXAMPLE_TARGETS[name]
    _changed()


def custom_call_target(name: str, *, types, element_types=("f32",), has_side_effect=False,
                       api_versions=(1,), backend_config="", accepts=None):
    """Decorator form: ``@custom_call_target("vendor.axpy", types=...)`` on the oracle."""
    def deco(oracle):
        register_target(CustomCallTarget(name, oracle, types, tuple(element_types),
                                         has_side_effect, tuple(api_versions), backend_config,
                                         accepts))
        return oracle
    return deco


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = ep.load()
            if callable(found) and not isinstance(found, CustomCallTarget):
                found = found()
        except Exception as e:  # noqa: BLE001 - one line naming the entry point
            raise TargetError(f"entry point {ep.name} = {ep.value} in {ENTRY_POINT_GROUP}: "
                              f"{type(e).__name__}: {e}") from None
        for t in (found if isinstance(found, (list, tuple)) else [found]):
            if t.name not in _REGISTERED:
                register_target(t)


def targets() -> dict[str, CustomCallTarget]:
    """Every registered target (entry points loaded on first use), by name."""
    _load_entry_points()
    return dict(_REGISTERED)


def target(name: str) -> CustomCallTarget | None:
    return targets().get(name)


# -- the placeholders: targets nobody registered ----------------------------------------

def _tensor(shape, et):
    return f"tensor<{''.join(f'{d}x' for d in shape)}{et}>"


def _pure(et, shape):
    return [_tensor(shape, et), _tensor(shape[1:], "si32")], [_tensor(shape, et)]


def _effect(et, shape):
    return [_tensor(shape, et), "token"], [_tensor(shape, et), "token"]


def _no_values(inputs, attributes):
    raise LookupError("a placeholder target has no values")


def _all_types() -> tuple[str, ...]:
    from conformance.core.types import ALL_ELEMENT_TYPES
    return tuple(t.name for t in ALL_ELEMENT_TYPES)


_ALL_TYPES = _all_types()       # every drawn element type (the newer float formats too)

#: the suite's own names for calls of targets nobody registered: their contract (types,
#: side effect) is the suite's declaration, so that every rule has invalid cases, but they
#: have no values (no oracle) and no backend knows them
PLACEHOLDERS = {    # (the one with side effects first: a canonical signature, which
                    # samples what rules are breakable, then has a side effect to drop)
    UNREGISTERED_EFFECT: CustomCallTarget(UNREGISTERED_EFFECT, _no_values, _effect, _ALL_TYPES,
                                          has_side_effect=True, api_versions=(1, 2, 3)),
    UNREGISTERED: CustomCallTarget(UNREGISTERED, _no_values, _pure, _ALL_TYPES,
                                   api_versions=(1, 2, 3)),
}


def contract(name: str) -> CustomCallTarget | None:
    """What the suite knows of ``name``'s calls: its registration, or a placeholder's."""
    return target(name) or PLACEHOLDERS.get(name)


# -- what the spec's expressions call (specs/expressions.py) ------------------------------

def names_for(element_type: str) -> list[str]:
    """Registered targets that take ``element_type``, by name; the placeholders if none."""
    found = sorted(n for n, t in targets().items() if element_type in t.element_types
                   and t is not EXAMPLE_TARGETS.get(n))
    return found or list(PLACEHOLDERS)


def covers(element_type: str) -> bool:
    """Whether custom_call's matrix has a column for ``element_type``: every type while no
    target is registered (signature-level cases), else the registered targets' types."""
    drawn = [t for n, t in targets().items() if t is not EXAMPLE_TARGETS.get(n)]
    return not drawn or any(element_type in t.element_types for t in drawn)


def io_types(name: str, element_type: str, shape: list) -> list:
    """[input types, result types] of one call of ``name``."""
    from conformance.core.types import value_type
    t = contract(name)
    if t is None:
        raise TargetError(f"custom call target {name!r} is not registered")
    ins, outs = t.types(element_type, list(shape))
    return [[value_type(x) for x in ins], [value_type(x) for x in outs]]


def accepts(name: str, inputs: Sequence, results: Sequence) -> bool:
    """Whether the types of a call are ones the target declares (any for a name the suite
    knows nothing of)."""
    t = contract(name)
    if t is None:
        return True
    if t.accepts is not None:
        return bool(t.accepts(list(inputs), list(results)))
    from conformance.core.types import TensorType
    tensors = [x for x in list(inputs) + list(results) if isinstance(x, TensorType)]
    et = tensors[0].element_type.name if tensors else t.element_types[0]
    if et not in t.element_types:
        return False
    try:
        want_in, want_out = io_types(name, et, list(tensors[0].shape) if tensors else [])
    except Exception:  # noqa: BLE001 - a shape the target's types() cannot take
        return False
    return list(inputs) == want_in and list(results) == want_out


def side_effect_choices(name: str) -> list[bool]:
    t = contract(name)
    return [True] if t is not None and t.has_side_effect else [False, True]


def side_effect_ok(name: str, has_side_effect: bool) -> bool:
    t = contract(name)
    return t is None or not t.has_side_effect or bool(has_side_effect)


def api_version_choices(name: str) -> list[int]:
    # (not 0, API_VERSION_UNSPECIFIED, for the placeholders: XLA refuses to compile it,
    # "Unknown custom-call API version enum value: 0", which says nothing of a target)
    t = contract(name)
    return list(t.api_versions) if t is not None else [1]


def unregistered_mask(name: str, x) -> "np.ndarray":
    """Every element of ``x`` where ``name`` has no registered oracle (its values are
    implementation-defined and unknown to the suite), none where it has one."""
    import numpy as np
    return np.full(np.shape(x), target(name) is None, bool)


def backend_config_of(name: str) -> str:
    t = contract(name)
    return t.backend_config if t is not None else ""
