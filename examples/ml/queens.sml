(* The N-queens problem: count all placements for N = 4..8 and print the first solution for 8 *)
fun safe (col, placed) =
  let
    fun ok (_, []) = true
      | ok (d, c :: rest) = c <> col andalso c + d <> col andalso c - d <> col andalso ok (d + 1, rest)
  in
    ok (1, placed)
  end

(* all solutions, each a list of columns, the last-placed row first *)
fun queens n =
  let
    fun place (0, placed) = [placed]
      | place (k, placed) =
          List.concat (List.tabulate (n, fn col =>
            if safe (col, placed) then place (k - 1, col :: placed) else []))
  in
    place (n, [])
  end

fun count n =
  let
    fun place (0, _) = 1
      | place (k, placed) =
          foldl (fn (col, acc) => if safe (col, placed) then acc + place (k - 1, col :: placed) else acc)
                0 (List.tabulate (n, fn i => i))
  in
    place (n, [])
  end

val _ = app (fn n => print (Int.toString n ^ " queens: " ^ Int.toString (count n) ^ " solutions\n"))
            [4, 5, 6, 7, 8]

val first = rev (hd (queens 8))
val _ = print ("first solution for 8: " ^ String.concatWith "," (map Int.toString first) ^ "\n")
val _ = app (fn c => print (implode (List.tabulate (8, fn i => if i = c then #"Q" else #".")) ^ "\n")) first
