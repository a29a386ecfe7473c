"""GL0xx: the file itself - parse errors, pragmas, shell syntax, tools the base lacks."""
