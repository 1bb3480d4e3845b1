(* Fork-join parallelism: a parallel Fibonacci with ForkJoin.par and a sequential cutoff *)
fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)

fun pfib n =
  if n < 12 then fib n
  else
    let val (a, b) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2))
    in a + b end

val _ = print ("pfib 18 = " ^ Int.toString (pfib 18) ^ "\n")
val _ = print ("agrees with fib: " ^ Bool.toString (pfib 18 = fib 18) ^ "\n")

(* the two branches may return different types *)
val (n, s) = ForkJoin.par (fn () => fib 15, fn () => String.concatWith "," (List.tabulate (5, Int.toString o fib)))
val _ = print (Int.toString n ^ " / " ^ s ^ "\n")
