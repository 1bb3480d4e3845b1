(* Naive doubly recursive Fibonacci: fib 25 = 75025 (242785 calls). Same algorithm: fib25.py. *)
fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)

val _ = print (Int.toString (fib 25) ^ "\n")
