(* A compiler from arithmetic expressions to code for a stack machine, and the machine that runs it; checked against a direct evaluator *)
datatype expr = Const of int | Plus of expr * expr | Times of expr * expr | Minus of expr * expr | Neg of expr
datatype instr = PUSH of int | ADD | MUL | SUB | NEG

fun compile (Const n) = [PUSH n]
  | compile (Plus (a, b)) = compile a @ compile b @ [ADD]
  | compile (Times (a, b)) = compile a @ compile b @ [MUL]
  | compile (Minus (a, b)) = compile a @ compile b @ [SUB]
  | compile (Neg a) = compile a @ [NEG]

exception StackUnderflow

fun exec ([], [result]) = result
  | exec ([], _) = raise StackUnderflow
  | exec (PUSH n :: code, stack) = exec (code, n :: stack)
  | exec (NEG :: code, x :: stack) = exec (code, ~x :: stack)
  | exec (ADD :: code, y :: x :: stack) = exec (code, x + y :: stack)
  | exec (MUL :: code, y :: x :: stack) = exec (code, x * y :: stack)
  | exec (SUB :: code, y :: x :: stack) = exec (code, x - y :: stack)
  | exec (_, _) = raise StackUnderflow

fun eval (Const n) = n
  | eval (Plus (a, b)) = eval a + eval b
  | eval (Times (a, b)) = eval a * eval b
  | eval (Minus (a, b)) = eval a - eval b
  | eval (Neg a) = ~ (eval a)

fun showInstr (PUSH n) = "PUSH " ^ Int.toString n
  | showInstr ADD = "ADD"
  | showInstr MUL = "MUL"
  | showInstr SUB = "SUB"
  | showInstr NEG = "NEG"

val e = Minus (Times (Plus (Const 2, Const 3), Const 4), Neg (Const 5))
val code = compile e
val _ = print (String.concatWith "; " (map showInstr code) ^ "\n")
val _ = print ("machine: " ^ Int.toString (exec (code, [])) ^ ", evaluator: " ^ Int.toString (eval e) ^ "\n")

(* a larger expression: the sum of i * i for i = 1..30, built as a tree *)
val big = foldl (fn (i, acc) => Plus (acc, Times (Const i, Const i))) (Const 0) (List.tabulate (30, fn i => i + 1))
val _ = print ("big: " ^ Int.toString (length (compile big)) ^ " instructions, result " ^ Int.toString (exec (compile big, []))
               ^ ", agrees: " ^ Bool.toString (exec (compile big, []) = eval big) ^ "\n")
val _ = print ("bad code: " ^ (Int.toString (exec ([PUSH 1, ADD], [])) handle StackUnderflow => "stack underflow") ^ "\n")
