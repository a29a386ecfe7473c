"""GL6xx: credentials baked into images, and downloads with their checks turned off."""
