"""The tensor dialect's passes and lowerings (hpgrem/passes/__init__.py is their table)."""
