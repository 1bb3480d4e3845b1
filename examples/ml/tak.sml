(* The Takeuchi function, a classic call-intensive benchmark, with a call counter in a ref *)
val calls = ref 0

fun tak (x, y, z) =
  (calls := !calls + 1;
   if y < x then tak (tak (x - 1, y, z), tak (y - 1, z, x), tak (z - 1, x, y)) else z)

fun show (x, y, z) =
  let
    val _ = calls := 0
    val r = tak (x, y, z)
  in
    print ("tak " ^ Int.toString x ^ " " ^ Int.toString y ^ " " ^ Int.toString z ^ " = "
           ^ Int.toString r ^ " in " ^ Int.toString (!calls) ^ " calls\n")
  end

val _ = show (6, 4, 2)
val _ = show (10, 6, 2)
val _ = show (13, 8, 4)
