"""GL2xx: pinning of frameworks, kernels and CUDA packages."""
