(* Insertion sort with foldr, and counting the comparisons it makes with a ref *)
val comparisons = ref 0

fun less (a : int, b) = (comparisons := !comparisons + 1; a < b)

fun insert (x, []) = [x]
  | insert (x, y :: ys) = if less (y, x) then y :: insert (x, ys) else x :: y :: ys

fun isort xs = foldr insert [] xs

fun report label xs =
  let
    val _ = comparisons := 0
    val sorted = isort xs
  in
    print (label ^ ": " ^ String.concatWith " " (map Int.toString sorted)
           ^ " (" ^ Int.toString (!comparisons) ^ " comparisons)\n")
  end

val _ = report "random" [5, 2, 9, 1, 5, 6, 3, 8, 7, 4]
val _ = report "sorted" (List.tabulate (10, fn i => i + 1))
val _ = report "reversed" (List.tabulate (10, fn i => 10 - i))
val _ = report "empty" []
