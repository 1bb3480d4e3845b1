(* Reals: arithmetic, Math.sqrt, conversions (real, Real.fromInt, floor, ceil, round, trunc) and printing with Real.fmt (StringCvt.FIX (SOME k)) *)
fun fmt k x = Real.fmt (StringCvt.FIX (SOME k)) x
val pi = 3.14159265358979

fun mean xs = foldl (op +) 0.0 xs / Real.fromInt (length xs)
fun stddev xs =
  let val m = mean xs
  in Math.sqrt (foldl (fn (x, s) => s + (x - m) * (x - m)) 0.0 xs / real (length xs)) end

(* Newton's method for square roots, compared with Math.sqrt *)
fun newton x =
  let
    fun go (g, 0) = g
      | go (g, k) = go ((g + x / g) / 2.0, k - 1)
  in
    go (x / 2.0, 20)
  end

val samples = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
val _ = print ("mean " ^ fmt 3 (mean samples) ^ ", stddev " ^ fmt 3 (stddev samples) ^ "\n")
val _ = app (fn x => print ("sqrt " ^ fmt 1 x ^ " = " ^ fmt 6 (Math.sqrt x) ^ " (newton " ^ fmt 6 (newton x) ^ ")\n"))
            [2.0, 10.0, 144.0]
val _ = app (fn r => print ("circle r=" ^ Int.toString r ^ ": area " ^ fmt 2 (pi * real r * real r) ^ "\n")) [1, 2, 10]
val _ = print ("fmt: " ^ fmt 0 2.718 ^ " " ^ fmt 2 ~1.5 ^ " " ^ fmt 4 (1.0 / 3.0) ^ " " ^ fmt 3 0.0 ^ " " ^ fmt 2 1234567.891 ^ "\n")

val _ = print ("halves to even: " ^ String.concatWith " " [fmt 1 0.25, fmt 1 0.75, fmt 0 0.5, fmt 0 1.5, fmt 0 ~2.5] ^ "\n")
fun showInts xs = String.concatWith " " (map Int.toString xs)
val xs = [2.5, 3.5, ~2.5, 2.7, ~2.7]
val _ = print ("floor: " ^ showInts (map floor xs) ^ "\n")
val _ = print ("ceil:  " ^ showInts (map ceil xs) ^ "\n")
val _ = print ("round: " ^ showInts (map round xs) ^ "\n")
val _ = print ("trunc: " ^ showInts (map trunc xs) ^ "\n")
val _ = print ("compare: " ^ Bool.toString (0.1 + 0.2 > 0.3) ^ " " ^ Bool.toString (1.5 <= 1.5) ^ "\n")

(* the hypotenuse of integer triangles, and which are exact *)
fun hyp (a, b) = Math.sqrt (real (a * a + b * b))
val _ = app (fn (a, b) =>
               let val h = hyp (a, b)
               in print (Int.toString a ^ "," ^ Int.toString b ^ " -> " ^ fmt 4 h
                         ^ (if abs (real (round h) - h) < 0.000001 then " exact" else "") ^ "\n") end)
            [(3, 4), (1, 1), (5, 12), (2, 3)]

(* numerical integration of x^2 on [0,1] with the trapezoid rule *)
fun integrate f (a, b) n =
  let
    val h = (b - a) / real n
    fun sum (i, acc) = if i >= n then acc else sum (i + 1, acc + f (a + real i * h))
  in
    h * ((f a + f b) / 2.0 + sum (1, 0.0))
  end
val _ = print ("integral x^2 on [0,1] ~ " ^ fmt 5 (integrate (fn x => x * x) (0.0, 1.0) 100) ^ "\n")
