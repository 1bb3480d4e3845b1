"""The PARLOG dialect's passes (hpgrem/passes/__init__.py is their table)."""
