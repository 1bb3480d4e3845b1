(* Fork/join Fibonacci with ForkJoin.par at every level and no cutoff of its own: how small a
   task is worth exporting is left to the compiler (the ml-grain pass). pfib 22 = 17711. *)
fun pfib n =
  if n < 2 then n
  else let val (x, y) = ForkJoin.par (fn () => pfib (n - 1), fn () => pfib (n - 2)) in x + y end

val _ = print (Int.toString (pfib 22) ^ "\n")
