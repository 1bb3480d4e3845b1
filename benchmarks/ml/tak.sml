(* Takeuchi's function (Gabriel benchmark), standard arguments tak 18 12 6 = 7 (63609 calls).
   Same algorithm: tak.py. *)
fun tak (x, y, z) =
  if y < x then tak (tak (x - 1, y, z), tak (y - 1, z, x), tak (z - 1, x, y)) else z

val _ = print (Int.toString (tak (18, 12, 6)) ^ "\n")
