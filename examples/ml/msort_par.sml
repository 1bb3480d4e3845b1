(* Parallel merge sort as a new user writes it: halve the list, sort the halves with ForkJoin.par,
   merge them. merge and halve recurse deeper than direct code's Python frames (200): the
   shape that ended in NameError at -O2 before issue 15. *)
fun merge ([], ys) = ys
  | merge (xs, []) = xs
  | merge (x :: xs, y :: ys) =
      if x < y then x :: merge (xs, y :: ys) else y :: merge (x :: xs, ys)
fun halve (x :: y :: rest) = let val (a, b) = halve rest in (x :: a, y :: b) end
  | halve xs = (xs, [])
fun sort [] = []
  | sort [x] = [x]
  | sort xs =
      let val (a, b) = halve xs
          val (sa, sb) = ForkJoin.par (fn () => sort a, fn () => sort b)
      in merge (sa, sb) end
val () = print (Int.toString (length (sort (List.tabulate (1000, fn i => (i * 7919) mod 1000)))) ^ "\n")
