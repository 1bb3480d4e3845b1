"""The driver: the command line (`cli`) and the compile-and-run pipeline (`pipeline`). It imports
the front ends, the IR, the passes and the machine, lazily; nothing imports it."""
