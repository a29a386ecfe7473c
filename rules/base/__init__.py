"""GL1xx: the base image and the CUDA stack on it."""
