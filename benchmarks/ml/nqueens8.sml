(* N queens by backtracking over rows, counting solutions: 92 for 8 queens.
   placed holds the columns of the rows above, nearest first. Same algorithm: nqueens8.py. *)
fun safe (_, _, []) = true
  | safe (col, dist, c :: cs) =
      col <> c andalso col <> c + dist andalso col <> c - dist andalso safe (col, dist + 1, cs)

fun queens (n, row, placed) =
  if row = n then 1
  else
    let
      fun try col =
        if col > n then 0
        else (if safe (col, 1, placed) then queens (n, row + 1, col :: placed) else 0) + try (col + 1)
    in
      try 1
    end

val _ = print (Int.toString (queens (8, 0, [])) ^ "\n")
