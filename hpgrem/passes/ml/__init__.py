"""The ML dialect's passes (hpgrem/passes/__init__.py is their table)."""
