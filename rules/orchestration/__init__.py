"""GL7xx: compose and Kubernetes files that run GPU images (a Dockerfile lint imports none of it)."""
