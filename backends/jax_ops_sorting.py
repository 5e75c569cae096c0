"""jax.lax mappings of the sorting ops (registered into jax_ops.BUILDERS)."""
