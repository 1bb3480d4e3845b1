(* Conway's game of life on an 8x8 torus: a glider and a blinker, four generations *)
type cell = int * int
val rows = 8
val cols = 8

fun member (c : cell) cells = List.exists (fn d => d = c) cells

fun wrap (r, c) = (r mod rows, c mod cols)

fun liveNeighbours cells (r, c) =
  let
    val offsets = [(~1, ~1), (~1, 0), (~1, 1), (0, ~1), (0, 1), (1, ~1), (1, 0), (1, 1)]
  in
    length (List.filter (fn (dr, dc) => member (wrap (r + dr, c + dc)) cells) offsets)
  end

fun step cells =
  let
    val all = List.concat (List.tabulate (rows, fn r => List.tabulate (cols, fn c => (r, c))))
    fun alive p =
      let val n = liveNeighbours cells p
      in n = 3 orelse (n = 2 andalso member p cells) end
  in
    List.filter alive all
  end

fun render cells =
  app (fn r => print (implode (List.tabulate (cols, fn c => if member (r, c) cells then #"#" else #".")) ^ "\n"))
      (List.tabulate (rows, fn r => r))

fun run (0, cells, _) = cells
  | run (k, cells, gen) =
      (print ("generation " ^ Int.toString gen ^ " (" ^ Int.toString (length cells) ^ " alive)\n");
       render cells;
       run (k - 1, step cells, gen + 1))

val glider = [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
val blinker = [(5, 5), (5, 6), (5, 7)]
val final = run (4, glider @ blinker, 0)
val _ = print ("generation 4 (" ^ Int.toString (length final) ^ " alive)\n")
val _ = render final
