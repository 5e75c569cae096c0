"""The shared vocabulary every stage stands on.

Element and tensor types (``types``), exact numerics (``numerics``), literal values
(``literals``) and dense MLIR constants (``dense``), the signature and case records
(``case``) and the results-stream format (``results``). Specs, generators, oracles,
backends, the checker and the front-ends all import from here; nothing here imports
from them (tests/test_layers.py holds this).
"""
