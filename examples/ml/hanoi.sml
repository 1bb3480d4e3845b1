(* Towers of Hanoi: the moves for 3 discs, the move count for 10, and a check that simulating the moves on three pegs never puts a larger disc on a smaller one *)
fun hanoi (0, _, _, _) = []
  | hanoi (n, from, to, via) = hanoi (n - 1, from, via, to) @ [(n, from, to)] @ hanoi (n - 1, via, to, from)

val _ = app (fn (d, f, t) => print ("move disc " ^ Int.toString d ^ " from " ^ f ^ " to " ^ t ^ "\n"))
            (hanoi (3, "A", "C", "B"))

fun count n = length (hanoi (n, "A", "C", "B"))
val _ = print ("10 discs: " ^ Int.toString (count 10) ^ " moves\n")

(* pegs as three int lists, smallest disc first *)
exception Illegal of int
fun simulate n =
  let
    fun get ((a, b, c), p) = if p = "A" then a else if p = "B" then b else c
    fun set ((a, b, c), p, v) = if p = "A" then (v, b, c) else if p = "B" then (a, v, c) else (a, b, v)
    fun move ((d, from, to), pegs) =
      case (get (pegs, from), get (pegs, to)) of
        (top :: rest, dest) =>
          if top <> d then raise Illegal d
          else (case dest of
                  t :: _ => if t < d then raise Illegal d else ()
                | [] => ();
                set (set (pegs, from, rest), to, d :: dest))
      | ([], _) => raise Illegal d
  in
    foldl move (List.tabulate (n, fn i => i + 1), [], []) (hanoi (n, "A", "C", "B"))
  end

val (a, b, c) = simulate 6
val _ = print ("after 6 discs: A=" ^ Int.toString (length a) ^ " B=" ^ Int.toString (length b)
               ^ " C=" ^ String.concatWith "," (map Int.toString c) ^ "\n")
