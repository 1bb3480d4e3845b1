(* An else-if chain on one value, and a match with a shared arm, in a loop (what the ml-switch
   pass is for): each test of a value is made once. *)
fun weight x =
  if x = 0 then 5 else if x = 1 then 3 else if x = 2 then 8 else if x = 3 then 1
  else if x = 4 then 9 else if x = 5 then 2 else if x = 6 then 7 else 4

fun pair (0, 0) = 1 | pair (_, 0) = 2 | pair (_, _) = 3

fun loop (i, acc) = if i = 0 then acc else loop (i - 1, acc + weight (i mod 9) + pair (i mod 3, i mod 2))

val _ = print (Int.toString (loop (200000, 0)) ^ "\n")
