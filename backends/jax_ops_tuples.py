"""jax.lax mappings of the tuples ops (registered into jax_ops.BUILDERS)."""
