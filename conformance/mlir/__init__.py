"""The canonical program: cases and programs printed as StableHLO MLIR modules,
verified with the MLIR bindings jaxlib ships."""
