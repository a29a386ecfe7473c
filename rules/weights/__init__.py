"""GL3xx: model weights baked into images."""
