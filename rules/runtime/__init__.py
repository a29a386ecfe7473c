"""GL4xx: NVIDIA drivers and the runtime contract between an image and the NVIDIA Container Toolkit."""
