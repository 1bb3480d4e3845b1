(* A numeric kernel over reals: a Mandelbrot set on a grid (an escaping point leaves its loop by
   the exception Escaped), drawn in characters, and Simpson's rule over functions given as
   closures. `size` sets the grid's rows (twice as many columns) and the iteration bound. *)
val size = 48

exception Escaped of int

fun iterate (cr, ci, limit) =
  let
    fun loop (zr, zi, k) =
      if k = limit then limit
      else
        let val zr2 = zr * zr and zi2 = zi * zi
        in
          if zr2 + zi2 > 4.0 then raise Escaped k
          else loop (zr2 - zi2 + cr, 2.0 * zr * zi + ci, k + 1)
        end
  in loop (0.0, 0.0, 0) handle Escaped k => k end

val chars = " .:-=+*#%@"

fun row (y, rows, cols, limit) =
  let
    val ci = 1.2 - 2.4 * real y / real rows
    fun col x =
      let val cr = ~2.1 + 2.8 * real x / real cols
      in iterate (cr, ci, limit) end
  in List.tabulate (cols, col) end

fun shade limit k = String.sub (chars, if k = limit then 9 else k mod 9)

fun simpson f (a, b) n =
  let
    val h = (b - a) / real n
    fun sum (i, acc) =
      if i > n then acc
      else
        let val w = if i = 0 orelse i = n then 1.0 else if i mod 2 = 1 then 4.0 else 2.0
        in sum (i + 1, acc + w * f (a + real i * h)) end
  in sum (0, 0.0) * h / 3.0 end

val limit = 4 * size
val grid = List.tabulate (size, fn y => row (y, size, 2 * size, limit))
val _ = List.app (fn r => print (implode (map (shade limit) r) ^ "\n")) grid
val total = List.foldl (fn (r, a) => List.foldl op+ a r) 0 grid
val _ = print ("iterations: " ^ Int.toString total ^ "\n")

val fmt = Real.fmt (StringCvt.FIX (SOME 9))
val integrals =
  [("x^2 on [0,1]", fn x => x * x, (0.0, 1.0)),
   ("sqrt on [0,4]", Math.sqrt, (0.0, 4.0)),
   ("1/(1+x^2) on [0,1]", fn x => 1.0 / (1.0 + x * x), (0.0, 1.0))]
val _ = List.app (fn (name, f, range) => print (name ^ ": " ^ fmt (simpson f range (size * 400)) ^ "\n")) integrals
