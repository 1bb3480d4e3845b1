"""The PARLOG primitives every layer agrees on: names, arities and where they may appear.

The front end checks calls against this table; `pam.parlog.primitives` implements each entry.
"""

# Tests suspend until decidable; they may appear in guards and in bodies.
TESTS = frozenset({
    "data/1", "var/1", "==/2", "\\==/2",
    "</2", ">/2", "=</2", ">=/2", "=:=/2", "=\\=/2",
    "atom/1", "integer/1", "float/1", "number/1", "atomic/1", "compound/1",
})

# Body primitives (`=/2` may also appear in a guard, where it only matches).
BODY = frozenset({
    "=/2", "is/2", "true/0", "write/1", "nl/0", "call/1", "functor/3", "arg/3", "=../2",
    "atom_codes/2", "number_codes/2", "length/2", "halt/0", "call/3",
    # input as streams, where a goal runs, the end of the run with a status (spec/parlog.md)
    "read_stream/1", "open_read/2", "current_pe/1", "pes/1", "list/1", "halt/1",
})

# Parlog86 constructs a later issue brings; named here so their diagnostic is precise.
NOT_YET = frozenset({"set/3", "subset/3"})

PRIMITIVES = TESTS | BODY

# What a flat guard may hold, run inline by clause code: the tests, matching `=` and arithmetic
# `is` on bound operands (KL1's `:=` in a guard); anything else makes a guard deep.
FLAT_GUARD = TESTS | frozenset({"=/2", "is/2"})

# What an all-solutions relation may call besides all-solutions relations: the pure primitives
# (`\=` only there: a search can undo the bindings a trial unification made).
SEARCH_PRIMITIVES = TESTS | frozenset({
    "=/2", "\\=/2", "is/2", "true/0", "functor/3", "arg/3", "=../2", "atom_codes/2", "number_codes/2", "length/2",
})

# Primitives the machine runs at commit rather than as tasks: they have no effect but bindings
# (the schedule pass relies on it; pam.parlog.primitives implements them so).
INLINE = TESTS | frozenset({
    "=/2", "is/2", "functor/3", "arg/3", "=../2", "atom_codes/2", "number_codes/2", "length/2", "true/0",
    "list/1",
})


def is_primitive(key: str) -> bool:
    return key in PRIMITIVES

