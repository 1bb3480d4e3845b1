(* Matrices as lists of rows: transpose, multiplication, identity, powers (Fibonacci by matrix power) and determinants by cofactor expansion *)
type matrix = int list list

fun transpose ([] : matrix) : matrix = []
  | transpose ([] :: _) = []
  | transpose rows = map hd rows :: transpose (map tl rows)

fun zipWith f (x :: xs, y :: ys) = f (x, y) :: zipWith f (xs, ys)
  | zipWith _ _ = []
fun dot (xs, ys) = foldl (op +) 0 (zipWith (op * ) (xs, ys))

fun mul (a : matrix, b : matrix) : matrix =
  let val cols = transpose b
  in map (fn row => map (fn col => dot (row, col)) cols) a end

fun identity n : matrix = List.tabulate (n, fn i => List.tabulate (n, fn j => if i = j then 1 else 0))

fun power (m : matrix, 0) = identity (length m)
  | power (m, k) =
      let val half = power (m, k div 2)
          val sq = mul (half, half)
      in if k mod 2 = 0 then sq else mul (sq, m) end

fun minor (m : matrix, j) = map (fn row => List.take (row, j) @ List.drop (row, j + 1)) (tl m)

fun det ([] : matrix) = 1
  | det [[x]] = x
  | det m =
      let
        val first = hd m
        fun term (j, x) = (if j mod 2 = 0 then x else ~x) * det (minor (m, j))
      in
        foldl (op +) 0 (List.tabulate (length first, fn j => term (j, List.nth (first, j))))
      end

fun show (m : matrix) = app (fn row => print (String.concatWith " " (map Int.toString row) ^ "\n")) m

val a = [[1, 2, 3], [4, 5, 6]]
val b = [[7, 8], [9, 10], [11, 12]]
val _ = (print "a * b =\n"; show (mul (a, b)))
val _ = (print "transpose a =\n"; show (transpose a))
val fibm = power ([[1, 1], [1, 0]], 30)
val _ = print ("fib 30 by matrix power: " ^ Int.toString (List.nth (hd fibm, 1)) ^ "\n")
val _ = print ("det = " ^ Int.toString (det [[2, 0, 1], [1, 3, 2], [1, 1, 2]]) ^ "\n")
val _ = print ("det of 4x4 = " ^ Int.toString (det [[1, 2, 3, 4], [5, 6, 7, 8], [2, 6, 4, 8], [3, 1, 1, 2]]) ^ "\n")
val _ = print ("identity^5 = identity: " ^ Bool.toString (power (identity 3, 5) = identity 3) ^ "\n")
