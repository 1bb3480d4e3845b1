(* Higher-order functions: map, foldl, foldr, List.filter, List.partition, List.tabulate, List.exists/all/find, composition with o and currying *)
val nums = List.tabulate (10, fn i => i + 1)
fun show xs = "[" ^ String.concatWith "," (map Int.toString xs) ^ "]"

val _ = print ("nums      " ^ show nums ^ "\n")
val _ = print ("squares   " ^ show (map (fn x => x * x) nums) ^ "\n")
val _ = print ("evens     " ^ show (List.filter (fn x => x mod 2 = 0) nums) ^ "\n")
val (small, large) = List.partition (fn x => x <= 3) nums
val _ = print ("partition " ^ show small ^ " " ^ show large ^ "\n")
val _ = print ("sum       " ^ Int.toString (foldl (op +) 0 nums) ^ "\n")
val _ = print ("product   " ^ Int.toString (foldl (op * ) 1 nums) ^ "\n")
val _ = print ("foldl ::  " ^ show (foldl (op ::) [] nums) ^ "\n")
val _ = print ("foldr ::  " ^ show (foldr (op ::) [] nums) ^ "\n")
val _ = print ("foldl -   " ^ Int.toString (foldl (op -) 0 [1, 2, 3]) ^ ", foldr - " ^ Int.toString (foldr (op -) 0 [1, 2, 3]) ^ "\n")

fun compose fs = foldr (op o) (fn x => x) fs
val inc = fn x => x + 1
val double = fn x => 2 * x
val _ = print ("(inc o double) 5 = " ^ Int.toString ((inc o double) 5)
               ^ ", (double o inc) 5 = " ^ Int.toString ((double o inc) 5) ^ "\n")
val _ = print ("compose [inc, double, inc] 5 = " ^ Int.toString (compose [inc, double, inc] 5) ^ "\n")

(* curried functions, partially applied *)
fun add x y = x + y
val add10 = add 10
fun twice f = f o f
val _ = print ("add10 5 = " ^ Int.toString (add10 5) ^ ", twice add10 5 = " ^ Int.toString (twice add10 5)
               ^ ", twice twice inc 0 = " ^ Int.toString (twice twice inc 0) ^ "\n")

val _ = print ("exists >9: " ^ Bool.toString (List.exists (fn x => x > 9) nums)
               ^ ", all >0: " ^ Bool.toString (List.all (fn x => x > 0) nums)
               ^ ", find >4: " ^ (case List.find (fn x => x > 4) nums of SOME x => Int.toString x | NONE => "none")
               ^ "\n")

(* a function returning functions: a tiny pipeline *)
fun pipeline stages = foldl (fn (f, g) => f o g) (fn x => x) stages
val p = pipeline [fn x => x + 3, fn x => x * x, fn x => x - 1]
val _ = print ("pipeline 2 = " ^ Int.toString (p 2) ^ "\n")

fun zipWith f (x :: xs, y :: ys) = f (x, y) :: zipWith f (xs, ys)
  | zipWith _ _ = []
val _ = print ("dot product " ^ Int.toString (foldl (op +) 0 (zipWith (op * ) ([1, 2, 3], [4, 5, 6]))) ^ "\n")
val table = List.tabulate (4, fn i => List.tabulate (4, fn j => (i + 1) * (j + 1)))
val _ = app (fn row => print (String.concatWith "\t" (map Int.toString row) ^ "\n")) table
val _ = List.app (fn s => print (s ^ ";")) (List.map (fn n => Int.toString n) (List.rev [1, 2, 3]))
val _ = print ("\n" ^ Int.toString (List.length (List.concat table)) ^ " " ^ Int.toString (List.foldr Int.max 0 (List.concat table)) ^ "\n")
