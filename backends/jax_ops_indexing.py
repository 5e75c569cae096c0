"""jax.lax mappings of the indexing ops (registered into jax_ops.BUILDERS)."""
