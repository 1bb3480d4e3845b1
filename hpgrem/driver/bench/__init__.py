"""`hpgrem bench`: the runner of the benchmarks, whose programs are data in benchmarks/."""
