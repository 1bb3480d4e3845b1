(* Fibonacci three ways: naive double recursion, an accumulating loop, and a list of the first terms *)
fun fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)

fun fibIter n =
  let
    fun go (0, a, _) = a
      | go (k, a, b) = go (k - 1, b, a + b)
  in
    go (n, 0, 1)
  end

val _ = print ("fib 20 = " ^ Int.toString (fib 20) ^ "\n")
val _ = print ("fibIter 20 = " ^ Int.toString (fibIter 20) ^ "\n")
val _ = print ("fibIter 88 = " ^ Int.toString (fibIter 88) ^ "\n")
val _ = print ("first 15: " ^ String.concatWith " " (List.tabulate (15, Int.toString o fibIter)) ^ "\n")
