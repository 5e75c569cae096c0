"""The checking layer: a signature checked against backends, as a stream of events."""
