(* Exceptions: declaring, raising and handling them, exceptions with arguments, exnName, re-raising, and the basis exceptions Div, Overflow, Subscript, Empty, Option and Chr *)
exception NotFound
exception BadInput of string
exception OutOfRange of int * int

fun find p [] = raise NotFound
  | find p (x :: xs) = if p x then x else find p xs

fun parse s =
  case Int.fromString s of
    SOME n => n
  | NONE => raise BadInput s

fun checkRange (lo, hi) n = if n < lo orelse n > hi then raise OutOfRange (n, hi) else n

fun describe e =
  case e of
    NotFound => "NotFound"
  | BadInput s => "BadInput \"" ^ s ^ "\""
  | OutOfRange (n, hi) => "OutOfRange (" ^ Int.toString n ^ ", " ^ Int.toString hi ^ ")"
  | Fail msg => "Fail: " ^ msg
  | _ => "other: " ^ exnName e

fun try label f =
  print (label ^ " = " ^ Int.toString (f ()) ^ "\n")
  handle e => print (label ^ " raised " ^ describe e ^ "\n")

val _ = try "find even" (fn () => find (fn x => x mod 2 = 0) [1, 3, 4, 5])
val _ = try "find negative" (fn () => find (fn x => x < 0) [1, 3, 4, 5])
val _ = try "parse 42" (fn () => parse "42")
val _ = try "parse abc" (fn () => parse "abc")
val _ = try "range 7" (fn () => checkRange (1, 10) (parse "7"))
val _ = try "range 12" (fn () => checkRange (1, 10) (parse "12"))
val _ = try "fail" (fn () => raise Fail "gave up")

(* the basis exceptions, caught by name *)
val _ = try "10 div 0" (fn () => 10 div 0)
val _ = try "11 mod 0" (fn () => 11 mod 0)
val _ = try "hd []" (fn () => hd [])
val _ = try "valOf NONE" (fn () => valOf NONE)
val _ = try "List.nth" (fn () => List.nth ([1, 2, 3], 5))
val _ = try "String.sub" (fn () => ord (String.sub ("abc", 3)))
val _ = try "chr 300" (fn () => ord (chr 300))

fun safeDiv (a, b) = a div b handle Div => 0
val _ = print ("safeDiv (7, 0) = " ^ Int.toString (safeDiv (7, 0)) ^ "\n")

fun pow (b, 0) = 1
  | pow (b, e) = b * pow (b, e - 1)
val _ = print ("2^62 overflows: "
               ^ ((Int.toString (pow (2, 62))) handle Overflow => "Overflow caught") ^ "\n")
val _ = print ("2^61 = " ^ Int.toString (pow (2, 61)) ^ "\n")

val _ = print ("element 10: " ^ (Int.toString (List.nth ([1, 2, 3], 10)) handle Subscript => "Subscript caught") ^ "\n")

(* re-raising: clean up, then pass the exception on *)
val depth = ref 0
fun guarded f x =
  (depth := !depth + 1;
   (f x before depth := !depth - 1)
   handle e => (depth := !depth - 1; print ("  cleaning up after " ^ exnName e ^ "\n"); raise e))

val _ = (print ("guarded ok: " ^ Int.toString (guarded (fn n => n * 2) 21) ^ "\n");
         print ("guarded fail: " ^ Int.toString (guarded (fn n => n div 0) 1) ^ "\n"))
        handle Div => print ("caught Div again, depth " ^ Int.toString (!depth) ^ "\n")

(* handlers match in order; the first that fits wins *)
fun ignoreInt (_ : int) = ()
fun classify f =
  (f (); "no exception")
  handle BadInput _ => "bad input"
       | Overflow => "overflow"
       | e => "something else: " ^ exnName e
val _ = app (fn f => print (classify f ^ "\n"))
            [fn () => (), fn () => ignoreInt (parse "x"), fn () => ignoreInt (pow (10, 30)), fn () => raise NotFound]
