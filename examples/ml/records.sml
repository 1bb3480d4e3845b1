(* Records: construction, #label selection, record patterns, records in lists, and functional update by hand *)
type point = {x : int, y : int}
type employee = {name : string, dept : string, salary : int}

val origin : point = {x = 0, y = 0}
val p : point = {y = 4, x = 3}

fun add (a : point, b : point) : point = {x = #x a + #x b, y = #y a + #y b}
fun manhattan ({x, y} : point) = abs x + abs y
fun showPoint ({x = px, y = py} : point) = "(" ^ Int.toString px ^ ", " ^ Int.toString py ^ ")"

val _ = print ("p = " ^ showPoint p ^ ", origin = " ^ showPoint origin ^ "\n")
val _ = print ("p + p = " ^ showPoint (add (p, p)) ^ ", |p| = " ^ Int.toString (manhattan p) ^ "\n")
val _ = print ("equal: " ^ Bool.toString (p = {x = 3, y = 4}) ^ " " ^ Bool.toString (p = origin) ^ "\n")

val staff : employee list =
  [{name = "Ada", dept = "eng", salary = 120},
   {name = "Brian", dept = "ops", salary = 90},
   {name = "Cleo", dept = "eng", salary = 105},
   {name = "Dan", dept = "sales", salary = 80}]

fun total (es : employee list) = foldl (fn (e, s) => #salary e + s) 0 es
fun inDept d = List.filter (fn (e : employee) => #dept e = d) staff
fun raise10 ({name, dept, salary} : employee) : employee = {name = name, dept = dept, salary = salary + salary div 10}

val _ = print ("payroll: " ^ Int.toString (total staff) ^ "\n")
val _ = print ("eng: " ^ String.concatWith ", " (map #name (inDept "eng")) ^ " earn "
               ^ Int.toString (total (inDept "eng")) ^ "\n")
val _ = app (fn (e : employee) => print (#name e ^ " -> " ^ Int.toString (#salary e) ^ "\n")) (map raise10 staff)

(* tuples are records with numeric labels *)
val triple = (1, "two", #"3")
val _ = print (Int.toString (#1 triple) ^ " " ^ #2 triple ^ " " ^ str (#3 triple) ^ "\n")

(* a nested record *)
val box = {corner = {x = 1, y = 2}, size = {w = 10, h = 20}, label = "box"}
val _ = print (#label box ^ " at " ^ showPoint (#corner box) ^ " area " ^ Int.toString (#w (#size box) * #h (#size box)) ^ "\n")
