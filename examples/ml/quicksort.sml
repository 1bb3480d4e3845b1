(* Quicksort on integer lists with List.partition, and a polymorphic version taking a comparison *)
fun quicksort [] = []
  | quicksort (p :: rest) =
      let val (small, large) = List.partition (fn x => x < p) rest
      in quicksort small @ [p] @ quicksort large end

fun sortBy (less : 'a * 'a -> bool) (xs : 'a list) : 'a list =
  case xs of
    [] => []
  | p :: rest =>
      let val (small, large) = List.partition (fn x => less (x, p)) rest
      in sortBy less small @ (p :: sortBy less large) end

(* a deterministic pseudo-random list: a linear congruential generator *)
fun randoms (0, _) = []
  | randoms (n, seed) =
      let val next = (seed * 1103515245 + 12345) mod 2147483648
      in next mod 1000 :: randoms (n - 1, next) end

fun showList xs = "[" ^ String.concatWith ", " (map Int.toString xs) ^ "]"

val data = randoms (20, 42)
val _ = print ("input:  " ^ showList data ^ "\n")
val _ = print ("sorted: " ^ showList (quicksort data) ^ "\n")
val _ = print ("descending: " ^ showList (sortBy (op >) data) ^ "\n")
val words = ["pear", "apple", "fig", "banana", "cherry", "date"]
val _ = print ("words: " ^ String.concatWith " " (sortBy (op <) words) ^ "\n")
val _ = print ("by length: " ^ String.concatWith " " (sortBy (fn (a, b) => size a < size b) words) ^ "\n")
fun isSorted (a :: (rest as b :: _)) = a <= b andalso isSorted rest
  | isSorted _ = true
val big = randoms (500, 7)
val _ = print ("500 sorted: " ^ Bool.toString (isSorted (quicksort big)) ^ ", length "
               ^ Int.toString (length (quicksort big)) ^ "\n")
