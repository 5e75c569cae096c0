"""The applications: the CLI and its runner, the pytest plugin, fuzz, programs,
merge, executors, expectations, reproducers."""
