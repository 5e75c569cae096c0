"""The suite's own tests: jax gets 8 host CPU devices for the collectives' grids (issue 18),
set before any test module starts jax (what `conformance run` does when collectives are
selected, and the pytest plugin when the conformance suite runs)."""
from conformance.cli import grid_devices

grid_devices()
