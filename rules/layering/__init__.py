"""GL5xx: what each layer keeps - caches, package indexes, build tools, files deleted too late."""
