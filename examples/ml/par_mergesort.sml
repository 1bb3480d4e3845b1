(* Parallel mergesort: sort both halves with ForkJoin.par, then merge; compared against a sequential insertion sort *)
fun merge ([], ys) = ys
  | merge (xs, []) = xs
  | merge (x :: xs, y :: ys) = if x <= y then x :: merge (xs, y :: ys) else y :: merge (x :: xs, ys)

fun isort xs = foldr (fn (x, acc) => merge ([x], acc)) [] xs

fun psort xs =
  let val n = length xs
  in
    if n <= 8 then isort xs
    else
      let
        val half = n div 2
        val (a, b) = ForkJoin.par (fn () => psort (List.take (xs, half)), fn () => psort (List.drop (xs, half)))
      in
        merge (a, b)
      end
  end

fun randoms (0, _) = []
  | randoms (n, seed) = let val s = (seed * 75 + 74) mod 65537 in s mod 1000 :: randoms (n - 1, s) end

val data = randoms (200, 1)
val sorted = psort data
val _ = print ("first ten: " ^ String.concatWith " " (map Int.toString (List.take (sorted, 10))) ^ "\n")
val _ = print ("last ten:  " ^ String.concatWith " " (map Int.toString (List.drop (sorted, 190))) ^ "\n")
val _ = print ("same as insertion sort: " ^ Bool.toString (sorted = isort data) ^ "\n")
fun psortStrings (xs : string list) =
  case xs of
    [] => []
  | [x] => [x]
  | _ =>
      let
        val half = length xs div 2
        fun mergeS ([], ys) = ys
          | mergeS (xs, []) = xs
          | mergeS (x :: xs, y :: ys) = if x <= y then x :: mergeS (xs, y :: ys) else y :: mergeS (x :: xs, ys)
        val (a, b) = ForkJoin.par (fn () => psortStrings (List.take (xs, half)), fn () => psortStrings (List.drop (xs, half)))
      in
        mergeS (a, b)
      end
val _ = print ("words: " ^ String.concatWith " " (psortStrings ["delta", "alpha", "echo", "bravo", "charlie"]) ^ "\n")
