"""Front ends: parsers, checkers and lowering to HPGREM."""
