(* Mutual recursion with `and`: even/odd, a mutually recursive datatype of trees and forests, and a tiny recursive-descent parser *)
fun isEven 0 = true
  | isEven n = isOdd (n - 1)
and isOdd 0 = false
  | isOdd n = isEven (n - 1)

val _ = print ("even 10: " ^ Bool.toString (isEven 10) ^ ", odd 7: " ^ Bool.toString (isOdd 7)
               ^ ", even 7: " ^ Bool.toString (isEven 7) ^ "\n")

(* a rose tree: a tree holds a forest of children, a forest is a list of trees *)
datatype 'a tree = Node of 'a * 'a forest
and 'a forest = Empty | Cons of 'a tree * 'a forest

fun sumTree (Node (x, f)) = x + sumForest f
and sumForest Empty = 0
  | sumForest (Cons (t, f)) = sumTree t + sumForest f

fun depthTree (Node (_, f)) = 1 + depthForest f
and depthForest Empty = 0
  | depthForest (Cons (t, f)) = Int.max (depthTree t, depthForest f)

fun flattenTree (Node (x, f)) = x :: flattenForest f
and flattenForest Empty = []
  | flattenForest (Cons (t, f)) = flattenTree t @ flattenForest f

fun leaf x = Node (x, Empty)
val t = Node (1, Cons (Node (2, Cons (leaf 4, Cons (leaf 5, Empty))), Cons (leaf 3, Cons (Node (6, Cons (Node (7, Cons (leaf 8, Empty)), Empty)), Empty))))
val _ = print ("sum " ^ Int.toString (sumTree t) ^ ", depth " ^ Int.toString (depthTree t)
               ^ ", preorder " ^ String.concatWith " " (map Int.toString (flattenTree t)) ^ "\n")

(* expr := term ('+' term)*, term := factor ('*' factor)*, factor := digit | '(' expr ')' *)
exception Parse of string
fun expr cs =
  let
    val (v, rest) = term cs
    fun more (acc, #"+" :: rest) = let val (w, r) = term rest in more (acc + w, r) end
      | more (acc, rest) = (acc, rest)
  in
    more (v, rest)
  end
and term cs =
  let
    val (v, rest) = factor cs
    fun more (acc, #"*" :: rest) = let val (w, r) = factor rest in more (acc * w, r) end
      | more (acc, rest) = (acc, rest)
  in
    more (v, rest)
  end
and factor (#"(" :: cs) =
      (case expr cs of
         (v, #")" :: rest) => (v, rest)
       | _ => raise Parse "expected )")
  | factor (c :: cs) = if Char.isDigit c then (ord c - ord #"0", cs) else raise Parse ("unexpected " ^ str c)
  | factor [] = raise Parse "unexpected end"

fun calc s =
  print (s ^ " = "
         ^ ((case expr (explode s) of
               (v, []) => Int.toString v
             | (_, c :: _) => "error: trailing " ^ str c)
            handle Parse msg => "error: " ^ msg))
  before print "\n"

val _ = app calc ["1+2*3", "(1+2)*3", "2*(3+4)*5", "(1+2", "7+", "9)"]
