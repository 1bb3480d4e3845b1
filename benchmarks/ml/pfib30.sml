(* Fork/join Fibonacci: ForkJoin.par above a grain of fib 16, sequential fib below it.
   pfib 30 = 832040. Used for the 16-PE (simulated) and 2-rank (MPI) speedups of ML. *)
fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)

fun pfib n =
  if n < 16 then fib n
  else let val (x, y) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in x + y end

val _ = print (Int.toString (pfib 30) ^ "\n")
