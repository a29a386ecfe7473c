"""Built images: sources, a lean layer walk, evidence and the image report."""
