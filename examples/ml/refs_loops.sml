(* References and while loops: a counter object, an imperative sum, a swap, and Collatz step counting *)
fun makeCounter () =
  let
    val n = ref 0
  in
    {incr = fn () => (n := !n + 1; !n), reset = fn () => n := 0, get = fn () => !n}
  end

val c = makeCounter ()
val _ = (#incr c (); #incr c (); #incr c ())
val _ = print ("counter after 3 increments: " ^ Int.toString (#get c ()) ^ "\n")
val _ = #reset c ()
val _ = print ("after reset: " ^ Int.toString (#get c ()) ^ ", then " ^ Int.toString (#incr c ()) ^ "\n")

(* two counters do not share state *)
val d = makeCounter ()
val _ = (#incr d (); #incr d ())
val _ = print ("c = " ^ Int.toString (#get c ()) ^ ", d = " ^ Int.toString (#get d ()) ^ "\n")

fun sumTo n =
  let
    val i = ref 1
    val total = ref 0
  in
    while !i <= n do (total := !total + !i; i := !i + 1);
    !total
  end
val _ = print ("sum 1..100 = " ^ Int.toString (sumTo 100) ^ "\n")

fun swap (a, b) = let val t = !a in a := !b; b := t end
val x = ref "left"
val y = ref "right"
val _ = swap (x, y)
val _ = print ("after swap: " ^ !x ^ " " ^ !y ^ "\n")

fun collatz n =
  let
    val k = ref n
    val steps = ref 0
  in
    while !k <> 1 do
      (if !k mod 2 = 0 then k := !k div 2 else k := 3 * !k + 1;
       steps := !steps + 1);
    !steps
  end
val _ = app (fn n => print ("collatz " ^ Int.toString n ^ ": " ^ Int.toString (collatz n) ^ " steps\n"))
            [1, 6, 7, 27]

(* a list built in a ref, in a loop counting down *)
val acc : int list ref = ref []
val i = ref 5
val _ = while !i > 0 do (acc := !i :: !acc; i := !i - 1)
val _ = print ("built: " ^ String.concatWith " " (map Int.toString (!acc)) ^ "\n")

(* a ref holding a function *)
val action = ref (fn (s : string) => print ("first: " ^ s ^ "\n"))
val _ = !action "hello"
val _ = action := (fn s => print ("second: " ^ s ^ "\n"))
val _ = !action "hello"
val r = ref 10
val old = !r before r := 20
val _ = print ("before: old " ^ Int.toString old ^ ", new " ^ Int.toString (!r) ^ "\n")
