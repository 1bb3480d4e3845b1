(* Several top-level chunks separated by `;`: each is checked and run in turn, later chunks see earlier bindings, shadowing, and top-level expressions bound to `it` *)
val greeting = "hello";
print (greeting ^ " from chunk 2\n");

fun square x = x * x
val nine = square 3;

val _ = print ("square 3 = " ^ Int.toString nine ^ "\n");

(* a new binding of square shadows the old one from here on; nine keeps its value *)
fun square (x : real) = x * x;
val _ = print ("square 1.5 = " ^ Real.fmt (StringCvt.FIX (SOME 2)) (square 1.5) ^ ", nine = " ^ Int.toString nine ^ "\n");

datatype shape = Circle of int | Rect of int * int;
fun area (Circle r) = 3 * r * r
  | area (Rect (w, h)) = w * h;
length [Circle 1, Rect (2, 3)];
print ("shapes: " ^ Int.toString it ^ ", total area " ^ Int.toString (area (Circle 1) + area (Rect (2, 3))) ^ "\n");

val counter = ref 0;
counter := !counter + 5;
counter := !counter * 2;
print ("counter = " ^ Int.toString (!counter) ^ "\n");
