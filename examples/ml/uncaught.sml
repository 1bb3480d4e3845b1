(* An uncaught exception ends the program: the lines printed before it stay, then hpgrem reports `uncaught exception Fail: bad` on stderr and exits with status 1 *)
fun check n = if n > 3 then raise Fail "bad" else print ("step " ^ Int.toString n ^ " ok\n")

val _ = (check 1; check 2; check 3)
val handled = (check 4; "not reached") handle Fail msg => "handled: " ^ msg
val _ = print (handled ^ "\n")
val _ = check 5
val _ = print "never printed\n"
