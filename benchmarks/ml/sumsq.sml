(* A loop over small helper functions (what the ml-inline pass is for): the sum of the squares
   of 1..200000 modulo 7, with a tuple accumulator. *)
fun sq x = x * x
fun add (a, b) = a + b
fun step (i, acc) = add (acc, sq i mod 7)
fun loop (i, acc) = if i = 0 then acc else loop (i - 1, step (i, acc))

val _ = print (Int.toString (loop (200000, 0)) ^ "\n")
