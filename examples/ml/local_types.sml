(* local declarations and type abbreviations: a bank account module hidden behind local, and type synonyms for a small geometry *)
type name = string
type amount = int
type account = {owner : name, balance : amount}
type 'a pair = 'a * 'a
type vec = int pair

exception Insufficient of amount

local
  val nextId = ref 100
  fun fresh () = (nextId := !nextId + 1; !nextId)
  fun fee (a : amount) : amount = if a > 1000 then 0 else 2
in
  fun openAccount (n : name) : int * account = (fresh (), {owner = n, balance = 0})
  fun deposit ({owner, balance} : account, a : amount) : account = {owner = owner, balance = balance + a}
  fun withdraw ({owner, balance} : account, a : amount) : account =
    let val total = a + fee balance
    in if total > balance then raise Insufficient (total - balance) else {owner = owner, balance = balance - total} end
end

fun show (id, acct : account) = print ("#" ^ Int.toString id ^ " " ^ #owner acct ^ ": " ^ Int.toString (#balance acct) ^ "\n")

val (id1, a1) = openAccount "ann"
val (id2, a2) = openAccount "ben"
val a1 = deposit (a1, 500)
val a1 = withdraw (a1, 100)
val a2 = deposit (a2, 2000)
val a2 = withdraw (a2, 1500)
val _ = show (id1, a1)
val _ = show (id2, a2)
val _ = (show (id1, withdraw (a1, 1000))) handle Insufficient short => print ("ann is short by " ^ Int.toString short ^ "\n")

fun addVec ((a, b) : vec, (c, d) : vec) : vec = (a + c, b + d)
fun scale (k : int) ((a, b) : vec) : vec = (k * a, k * b)
fun dot ((a, b) : vec, (c, d) : vec) = a * c + b * d
val v : vec = (3, 4)
val w : vec = addVec (v, scale 2 (1, ~1))
val _ = print ("w = (" ^ Int.toString (#1 w) ^ ", " ^ Int.toString (#2 w) ^ "), v.w = " ^ Int.toString (dot (v, w)) ^ "\n")
val names : name pair = ("x", "y")
val _ = print (#1 names ^ #2 names ^ "\n")

(* local inside let: helpers visible only to the functions that use them *)
val stats =
  let
    local
      fun sq (x : int) = x * x
    in
      fun sumSq xs = foldl (fn (x, s) => s + sq x) 0 xs
    end
    val xs = [1, 2, 3, 4]
  in
    (sumSq xs, length xs)
  end
val _ = print ("sum of squares " ^ Int.toString (#1 stats) ^ " over " ^ Int.toString (#2 stats) ^ " numbers\n")
