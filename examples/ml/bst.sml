(* A polymorphic binary search tree datatype: insert, member, inorder traversal, height, min and delete *)
datatype 'a tree = Leaf | Node of 'a tree * 'a * 'a tree

fun insert less (x, Leaf) = Node (Leaf, x, Leaf)
  | insert less (x, t as Node (l, y, r)) =
      if less (x, y) then Node (insert less (x, l), y, r)
      else if less (y, x) then Node (l, y, insert less (x, r))
      else t

fun member less (_, Leaf) = false
  | member less (x, Node (l, y, r)) =
      if less (x, y) then member less (x, l)
      else if less (y, x) then member less (x, r)
      else true

fun inorder Leaf = []
  | inorder (Node (l, x, r)) = inorder l @ [x] @ inorder r

fun height Leaf = 0
  | height (Node (l, _, r)) = 1 + Int.max (height l, height r)

fun size Leaf = 0
  | size (Node (l, _, r)) = size l + 1 + size r

fun minimum Leaf = NONE
  | minimum (Node (Leaf, x, _)) = SOME x
  | minimum (Node (l, _, _)) = minimum l

fun delete less (_, Leaf) = Leaf
  | delete less (x, Node (l, y, r)) =
      if less (x, y) then Node (delete less (x, l), y, r)
      else if less (y, x) then Node (l, y, delete less (x, r))
      else case minimum r of
             NONE => l
           | SOME m => Node (l, m, delete less (m, r))

val ints = foldl (fn (x, t) => insert (op <) (x, t)) Leaf [50, 30, 70, 20, 40, 60, 80, 35, 45, 65, 30]
fun showInts t = String.concatWith " " (map Int.toString (inorder t))
val _ = print ("inorder: " ^ showInts ints ^ "\n")
val _ = print ("size " ^ Int.toString (size ints) ^ ", height " ^ Int.toString (height ints) ^ "\n")
val _ = app (fn x => print ("member " ^ Int.toString x ^ ": " ^ Bool.toString (member (op <) (x, ints)) ^ "\n"))
            [35, 36, 80, 10]
val smaller = delete (op <) (30, delete (op <) (50, ints))
val _ = print ("after deleting 50 and 30: " ^ showInts smaller ^ "\n")
val _ = print ("min: " ^ (case minimum smaller of SOME m => Int.toString m | NONE => "none") ^ "\n")

val words = foldl (fn (w, t) => insert (op <) (w, t)) Leaf ["kiwi", "apple", "mango", "banana", "cherry", "apple"]
val _ = print ("words: " ^ String.concatWith ", " (inorder words) ^ "\n")
val _ = print ("height of a sorted insert of 1..10: "
               ^ Int.toString (height (foldl (fn (x, t) => insert (op <) (x, t)) Leaf (List.tabulate (10, fn i => i + 1))))
               ^ "\n")
