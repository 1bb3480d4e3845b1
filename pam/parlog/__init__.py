"""PARLOG's runtime: the rule compiler (`rules`, with `relation_code` and `clause_code`), its
task kind (`goal`), primitives, arithmetic and `write/1`. It imports the machine's core, never
another dialect's runtime."""
