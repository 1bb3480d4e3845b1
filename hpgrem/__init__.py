"""HPGREM: the intermediate form, its verifier, file format and passes."""
