(* Fork-join over a tree: build a balanced tree, then sum it, find its maximum and count its leaves with ForkJoin.par in both subtrees; an exception raised in a branch *)
datatype tree = Leaf of int | Node of tree * tree

fun build (lo, hi) =
  if lo = hi then Leaf lo
  else let val mid = (lo + hi) div 2 in Node (build (lo, mid), build (mid + 1, hi)) end

fun sum (Leaf n) = n
  | sum (Node (l, r)) = let val (a, b) = ForkJoin.par (fn () => sum l, fn () => sum r) in a + b end

fun reduce combine leaf (Leaf n) = leaf n
  | reduce combine leaf (Node (l, r)) =
      let val (a, b) = ForkJoin.par (fn () => reduce combine leaf l, fn () => reduce combine leaf r)
      in combine (a, b) end

val t = build (1, 200)
val _ = print ("sum 1..200 = " ^ Int.toString (sum t) ^ "\n")
val _ = print ("max = " ^ Int.toString (reduce Int.max (fn n => n) t) ^ "\n")
val _ = print ("leaves = " ^ Int.toString (reduce (op +) (fn _ => 1) t) ^ "\n")
val _ = print ("sum of squares = " ^ Int.toString (reduce (op +) (fn n => n * n) t) ^ "\n")
val _ = print ("depth = " ^ Int.toString (reduce (fn (a, b) => 1 + Int.max (a, b)) (fn _ => 0) t) ^ "\n")

(* an exception raised in a branch reaches the caller *)
exception Negative of int
fun check (Leaf n) = if n < 0 then raise Negative n else n
  | check (Node (l, r)) = let val (a, b) = ForkJoin.par (fn () => check l, fn () => check r) in a + b end
val bad = Node (Node (Leaf 1, Leaf ~2), Node (Leaf 3, Leaf ~4))
val _ = print ("check: " ^ (Int.toString (check bad) handle Negative n => "negative leaf " ^ Int.toString n) ^ "\n")
