"""The suite's own tests: jax gets 8 host CPU devices for the collectives' grids (issue 18),
asked for before any test module starts jax (as `conformance run` does when collectives
are selected, and the pytest plugin when the conformance suite runs)."""
from conformance.backends.jaxlib_support import ask_for_host_devices

ask_for_host_devices()
