(* Options: safe lookups that return NONE, chaining them, valOf, isSome and getOpt *)
fun safeDiv (_, 0) = NONE
  | safeDiv (a, b) = SOME (a div b)

fun lookup key [] = NONE
  | lookup key ((k, v) :: rest) = if k = key then SOME v else lookup key rest

fun safeHead [] = NONE
  | safeHead (x :: _) = SOME x

fun mapOpt f NONE = NONE
  | mapOpt f (SOME x) = SOME (f x)

fun bind NONE _ = NONE
  | bind (SOME x) f = f x

fun showOpt NONE = "NONE"
  | showOpt (SOME n) = "SOME " ^ Int.toString n

val ages = [("alice", 30), ("bob", 25), ("carol", 35)]
val _ = print ("alice: " ^ showOpt (lookup "alice" ages) ^ "\n")
val _ = print ("dave: " ^ showOpt (lookup "dave" ages) ^ "\n")
val _ = print ("10 div 3: " ^ showOpt (safeDiv (10, 3)) ^ ", 10 div 0: " ^ showOpt (safeDiv (10, 0)) ^ "\n")
val _ = print ("head []: " ^ showOpt (safeHead []) ^ ", head [7]: " ^ showOpt (safeHead [7]) ^ "\n")

(* chained: the age of the person, divided by the number of years in a decade *)
fun decades name = bind (lookup name ages) (fn a => safeDiv (a, 10))
val _ = print ("decades bob: " ^ showOpt (decades "bob") ^ ", decades eve: " ^ showOpt (decades "eve") ^ "\n")
val _ = print ("plus one: " ^ showOpt (mapOpt (fn x => x + 1) (lookup "carol" ages)) ^ "\n")

val found = List.filter isSome (map (fn n => lookup n ages) ["alice", "zed", "bob"])
val _ = print ("found " ^ Int.toString (length found) ^ ": " ^ String.concatWith " " (map (Int.toString o valOf) found) ^ "\n")
fun getOptInt opt = case opt of SOME n => n | NONE => 0
val _ = print ("default: " ^ Int.toString (getOptInt (lookup "zed" ages)) ^ "\n")
val _ = print ("Option.getOpt: " ^ Int.toString (Option.getOpt (lookup "bob" ages, ~1)) ^ " "
               ^ Int.toString (Option.getOpt (lookup "zed" ages, ~1)) ^ "\n")
val _ = print ("Option.isSome: " ^ Bool.toString (Option.isSome (SOME ())) ^ ", Option.valOf: "
               ^ Option.valOf (SOME "text") ^ "\n")
val _ = print ("nested: " ^ (case SOME (SOME 3) of SOME (SOME n) => Int.toString n | SOME NONE => "inner none" | NONE => "none") ^ "\n")
