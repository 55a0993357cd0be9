"""The CUDA training backend: LiteNet's hand-written kernels (`kernels/*.cu`) launched through CuPy."""
