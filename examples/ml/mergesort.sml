(* Mergesort: split, merge, and a stable sort of records by key *)
fun split [] = ([], [])
  | split [x] = ([x], [])
  | split (x :: y :: rest) = let val (a, b) = split rest in (x :: a, y :: b) end

fun merge less ([], ys) = ys
  | merge less (xs, []) = xs
  | merge less (x :: xs, y :: ys) =
      if less (y, x) then y :: merge less (x :: xs, ys) else x :: merge less (xs, y :: ys)

fun msort less [] = []
  | msort less [x] = [x]
  | msort less xs =
      let val (a, b) = split xs
      in merge less (msort less a, msort less b) end

(* split keeps alternate elements, so for stability we split by halves instead *)
fun stableSort less xs =
  let
    fun sort [] = []
      | sort [x] = [x]
      | sort ys =
          let val half = length ys div 2
          in merge less (sort (List.take (ys, half)), sort (List.drop (ys, half))) end
  in
    sort xs
  end

val nums = [38, 27, 43, 3, 9, 82, 10, ~4, 27, 0, 55, ~19]
val _ = print (String.concatWith " " (map Int.toString (msort (op <) nums)) ^ "\n")
val _ = print (String.concatWith " " (map Int.toString (msort (op >) nums)) ^ "\n")

val people = [{name = "ann", age = 31}, {name = "bob", age = 25}, {name = "cy", age = 31},
              {name = "dee", age = 25}, {name = "eve", age = 40}, {name = "fay", age = 25}]
val byAge = stableSort (fn (p : {name : string, age : int}, q : {name : string, age : int}) => #age p < #age q) people
val _ = app (fn p => print (#name p ^ " " ^ Int.toString (#age p) ^ "\n")) byAge
val _ = print (implode (msort (op <) (explode "mergesort")) ^ "\n")
