"""gpulint rules, one module per family; facts tables in data/."""
