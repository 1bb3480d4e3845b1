(* A purely functional queue (two lists) used for breadth-first search over a small graph given as an adjacency list *)
type 'a queue = 'a list * 'a list
val emptyQ : 'a queue = ([], [])
fun push (x, (front, back) : 'a queue) : 'a queue = (front, x :: back)
fun pop (([], []) : 'a queue) = NONE
  | pop ([], back) = pop (rev back, [])
  | pop (x :: front, back) = SOME (x, (front, back))

val graph =
  [(1, [2, 3]), (2, [4]), (3, [4, 5]), (4, [6]), (5, [6]), (6, []), (7, [1])]

fun neighbours v = case List.find (fn (u, _) => u = v) graph of SOME (_, ns) => ns | NONE => []

(* visit order and the distance of each reachable vertex *)
fun bfs start =
  let
    fun loop (q, seen, order) =
      case pop q of
        NONE => rev order
      | SOME ((v, d), q') =>
          let
            val fresh = List.filter (fn n => not (List.exists (fn s => s = n) seen)) (neighbours v)
            val q'' = foldl (fn (n, acc) => push ((n, d + 1), acc)) q' fresh
          in
            loop (q'', seen @ fresh, (v, d) :: order)
          end
  in
    loop (push ((start, 0), emptyQ), [start], [])
  end

fun showVisit (v, d) = Int.toString v ^ "@" ^ Int.toString d
val _ = print ("bfs from 1: " ^ String.concatWith " " (map showVisit (bfs 1)) ^ "\n")
val _ = print ("bfs from 7: " ^ String.concatWith " " (map showVisit (bfs 7)) ^ "\n")
val _ = print ("bfs from 6: " ^ String.concatWith " " (map showVisit (bfs 6)) ^ "\n")

(* the queue keeps first-in first-out order across the internal reversal *)
val q = foldl push emptyQ [1, 2, 3]
fun drain q = case pop q of NONE => [] | SOME (x, q') => x :: drain q'
val _ = case pop q of
          NONE => print "empty\n"
        | SOME (a, q) =>
            print ("popped " ^ Int.toString a ^ ", then "
                   ^ String.concatWith " " (map Int.toString (drain (push (4, q)))) ^ "\n")
