(* The higher-order functions of the basis slice, written in ML and compiled with every program
   (frontend/ml/lower.py maps basis names to these). Each walks its list with a loop, never
   with non-tail recursion, and applies its function left to right, as the SML Basis does. *)
fun rev_onto (nil, acc) = acc
  | rev_onto (x :: r, acc) = rev_onto (r, x :: acc)
fun map f l =
  let fun go (nil, acc) = rev_onto (acc, nil)
        | go (x :: r, acc) = go (r, f x :: acc)
  in go (l, nil) end
fun app f nil = ()
  | app f (x :: r) = (f x; app f r)
fun foldl f b nil = b
  | foldl f b (x :: r) = foldl f (f (x, b)) r
fun foldr f b l = foldl f b (rev_onto (l, nil))
fun filter p l =
  let fun go (nil, acc) = rev_onto (acc, nil)
        | go (x :: r, acc) = go (r, if p x then x :: acc else acc)
  in go (l, nil) end
fun exists p nil = false
  | exists p (x :: r) = p x orelse exists p r
fun all p nil = true
  | all p (x :: r) = p x andalso all p r
fun find p nil = NONE
  | find p (x :: r) = if p x then SOME x else find p r
fun partition p l =
  let fun go (nil, yes, no) = (rev_onto (yes, nil), rev_onto (no, nil))
        | go (x :: r, yes, no) = if p x then go (r, x :: yes, no) else go (r, yes, x :: no)
  in go (l, nil, nil) end
fun tabulate (n, f) =
  if n < 0 then raise Size
  else let fun go (i, acc) = if i >= n then rev_onto (acc, nil) else go (i + 1, f i :: acc)
       in go (0, nil) end
fun compose (f, g) = fn x => f (g x)
