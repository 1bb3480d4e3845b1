(* An expression language: a datatype of expressions, an environment of bindings, an evaluator and a printer *)
datatype expr =
    Num of int
  | Var of string
  | Add of expr * expr
  | Sub of expr * expr
  | Mul of expr * expr
  | Quot of expr * expr
  | Let of string * expr * expr
  | If of expr * expr * expr

type env = (string * int) list

exception Unbound of string

fun lookup (name, []) = raise Unbound name
  | lookup (name, (n, v) :: rest) = if n = name then v else lookup (name, rest)

fun eval (env : env) e =
  case e of
    Num n => n
  | Var x => lookup (x, env)
  | Add (a, b) => eval env a + eval env b
  | Sub (a, b) => eval env a - eval env b
  | Mul (a, b) => eval env a * eval env b
  | Quot (a, b) => eval env a div eval env b
  | Let (x, e1, e2) => eval ((x, eval env e1) :: env) e2
  | If (c, t, f) => if eval env c <> 0 then eval env t else eval env f

fun show (Num n) = Int.toString n
  | show (Var x) = x
  | show (Add (a, b)) = "(" ^ show a ^ " + " ^ show b ^ ")"
  | show (Sub (a, b)) = "(" ^ show a ^ " - " ^ show b ^ ")"
  | show (Mul (a, b)) = "(" ^ show a ^ " * " ^ show b ^ ")"
  | show (Quot (a, b)) = "(" ^ show a ^ " / " ^ show b ^ ")"
  | show (Let (x, a, b)) = "let " ^ x ^ " = " ^ show a ^ " in " ^ show b
  | show (If (c, t, f)) = "if " ^ show c ^ " then " ^ show t ^ " else " ^ show f

(* constant folding: simplify what does not depend on variables *)
fun simplify e =
  case e of
    Add (a, b) =>
      (case (simplify a, simplify b) of
         (Num x, Num y) => Num (x + y)
       | (Num 0, b') => b'
       | (a', Num 0) => a'
       | (a', b') => Add (a', b'))
  | Mul (a, b) =>
      (case (simplify a, simplify b) of
         (Num x, Num y) => Num (x * y)
       | (Num 1, b') => b'
       | (a', Num 1) => a'
       | (a', b') => Mul (a', b'))
  | Sub (a, b) => Sub (simplify a, simplify b)
  | Quot (a, b) => Quot (simplify a, simplify b)
  | Let (x, a, b) => Let (x, simplify a, simplify b)
  | If (c, t, f) => If (simplify c, simplify t, simplify f)
  | _ => e

fun run env e =
  print (show e ^ " => "
         ^ (Int.toString (eval env e) handle Unbound x => "error: unbound " ^ x
                                           | Div => "error: division by zero")
         ^ "\n")

val env = [("x", 6), ("y", 7)]
val _ = run env (Mul (Var "x", Var "y"))
val _ = run env (Let ("z", Add (Var "x", Num 1), Mul (Var "z", Var "z")))
val _ = run env (If (Sub (Var "x", Num 6), Num 1, Num 2))
val _ = run env (Quot (Num 100, Sub (Var "y", Num 7)))
val _ = run env (Add (Var "w", Num 1))
val _ = run [] (Let ("a", Num 3, Let ("b", Num 4, Add (Mul (Var "a", Var "a"), Mul (Var "b", Var "b")))))
val _ = print ("simplified: " ^ show (simplify (Add (Mul (Num 1, Var "x"), Add (Num 2, Num 3)))) ^ "\n")
