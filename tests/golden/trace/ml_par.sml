fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)
fun pfib n = if n < 5 then fib n else
  let val (a, b) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in a + b end
val _ = print (Int.toString (pfib 10) ^ "\n")
