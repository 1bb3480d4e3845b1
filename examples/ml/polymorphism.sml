(* Let-polymorphism: polymorphic functions used at several types, polymorphic datatypes, equality types, and explicit type annotations *)
fun id x = x
fun pair x = (x, x)
fun swap (a, b) = (b, a)
fun length' [] = 0
  | length' (_ :: xs) = 1 + length' xs

val _ = print (Int.toString (id 3) ^ " " ^ id "three" ^ " " ^ Bool.toString (id true) ^ "\n")
val (a, b) = swap ("left", 42)
val _ = print (Int.toString a ^ " " ^ b ^ "\n")
val _ = print (Int.toString (length' [1, 2, 3]) ^ " " ^ Int.toString (length' ["a", "b"])
               ^ " " ^ Int.toString (length' [[1], [], [2, 3]]) ^ "\n")

(* a let-bound polymorphic function, used at two types in the same body *)
val result =
  let
    fun twice f x = f (f x)
    val s = twice (fn s => s ^ "!") "hey"
    val n = twice (fn n => n * 3) 7
    val (p1, p2) = pair (twice id 5)
  in
    s ^ " " ^ Int.toString n ^ " " ^ Int.toString (p1 + p2)
  end
val _ = print (result ^ "\n")

(* equality types: member works on any type that admits equality *)
fun member (x, []) = false
  | member (x, y :: ys) = x = y orelse member (x, ys)
fun dedup [] = []
  | dedup (x :: xs) = if member (x, xs) then dedup xs else x :: dedup xs
val _ = print (String.concatWith " " (map Int.toString (dedup [1, 2, 1, 3, 2, 4])) ^ "\n")
val _ = print (String.concatWith " " (dedup ["a", "b", "a"]) ^ "\n")
val _ = print (Bool.toString (member ((1, "x"), [(2, "y"), (1, "x")])) ^ " "
               ^ Bool.toString (member ([1, 2], [[1], [1, 2, 3]])) ^ "\n")

datatype ('k, 'v) assoc = Assoc of ('k * 'v) list
fun empty () = Assoc []
fun bindKey (Assoc l) k v = Assoc ((k, v) :: l)
fun find (Assoc l) k = case List.find (fn (k', _) => k' = k) l of SOME (_, v) => SOME v | NONE => NONE
val colours = bindKey (bindKey (empty ()) "red" 1) "green" 2
val flags = bindKey (bindKey (empty ()) 1 true) 2 false
val _ = print (Int.toString (valOf (find colours "green")) ^ " " ^ Bool.toString (valOf (find flags 1))
               ^ " " ^ Bool.toString (isSome (find colours "blue")) ^ "\n")

fun mapPair (f : 'a -> 'b) ((x, y) : 'a * 'a) : 'b * 'b = (f x, f y)
val (u, v) = mapPair size ("four", "seven")
val _ = print (Int.toString u ^ " " ^ Int.toString v ^ "\n")
val k = (fn x => fn _ => x) : int -> string -> int
val _ = print (Int.toString (k 9 "ignored") ^ "\n")
