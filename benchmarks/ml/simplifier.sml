(* A symbolic simplifier: derivatives of polynomials, simplified by rules tried in turn (each a
   function that raises NoRule when it does not apply), to a fixed point; evaluation raises
   Undefined on a division by zero. `size` sets the degree and how many derivatives, `rounds`
   how many times they are made. *)
val size = 6
val rounds = 150

datatype expr =
    Num of int
  | X
  | Add of expr * expr
  | Mul of expr * expr
  | Neg of expr
  | Pow of expr * int
  | Quot of expr * expr

exception NoRule
exception Undefined

fun deriv (Num _) = Num 0
  | deriv X = Num 1
  | deriv (Add (a, b)) = Add (deriv a, deriv b)
  | deriv (Mul (a, b)) = Add (Mul (deriv a, b), Mul (a, deriv b))
  | deriv (Neg a) = Neg (deriv a)
  | deriv (Pow (a, n)) = Mul (Mul (Num n, Pow (a, n - 1)), deriv a)
  | deriv (Quot (a, b)) = Quot (Add (Mul (deriv a, b), Neg (Mul (a, deriv b))), Pow (b, 2))

(* the rules: each simplifies the top of an expression or raises NoRule *)
fun foldConst (Add (Num a, Num b)) = Num (a + b)
  | foldConst (Mul (Num a, Num b)) = Num (a * b)
  | foldConst (Neg (Num a)) = Num (~a)
  | foldConst _ = raise NoRule

fun units (Add (Num 0, e)) = e
  | units (Add (e, Num 0)) = e
  | units (Mul (Num 1, e)) = e
  | units (Mul (e, Num 1)) = e
  | units (Mul (Num 0, _)) = Num 0
  | units (Mul (_, Num 0)) = Num 0
  | units (Pow (_, 0)) = Num 1
  | units (Pow (e, 1)) = e
  | units (Quot (e, Num 1)) = e
  | units (Neg (Neg e)) = e
  | units _ = raise NoRule

fun shuffle (Mul (a, Num n)) = Mul (Num n, a)
  | shuffle (Mul (Num a, Mul (Num b, e))) = Mul (Num (a * b), e)
  | shuffle (Add (Num n, a)) = (case a of Num _ => raise NoRule | _ => Add (a, Num n))
  | shuffle (Add (Add (a, Num m), Num n)) = Add (a, Num (m + n))
  | shuffle (Mul (Num n, Neg a)) = Mul (Num (~n), a)
  | shuffle (Neg (Mul (Num n, a))) = Mul (Num (~n), a)
  | shuffle (Mul (Pow (a, m), Pow (b, n))) = if a = b then Pow (a, m + n) else raise NoRule
  | shuffle (Mul (X, Pow (X, n))) = Pow (X, n + 1)
  | shuffle _ = raise NoRule

val rules = [foldConst, units, shuffle]

fun first [] e = raise NoRule
  | first (r :: rs) e = r e handle NoRule => first rs e

fun mapChildren f (Add (a, b)) = Add (f a, f b)
  | mapChildren f (Mul (a, b)) = Mul (f a, f b)
  | mapChildren f (Quot (a, b)) = Quot (f a, f b)
  | mapChildren f (Neg a) = Neg (f a)
  | mapChildren f (Pow (a, n)) = Pow (f a, n)
  | mapChildren f e = e

fun simplify e =
  let val e' = mapChildren simplify e
  in simplify (first rules e') handle NoRule => e' end

fun size_of (Add (a, b)) = 1 + size_of a + size_of b
  | size_of (Mul (a, b)) = 1 + size_of a + size_of b
  | size_of (Quot (a, b)) = 1 + size_of a + size_of b
  | size_of (Neg a) = 1 + size_of a
  | size_of (Pow (a, _)) = 1 + size_of a
  | size_of _ = 1

fun power (b, 0) = 1
  | power (b, n) = b * power (b, n - 1)

fun eval x (Num n) = n
  | eval x X = x
  | eval x (Add (a, b)) = eval x a + eval x b
  | eval x (Mul (a, b)) = eval x a * eval x b
  | eval x (Neg a) = ~ (eval x a)
  | eval x (Pow (a, n)) = power (eval x a, n)
  | eval x (Quot (a, b)) =
      let val d = eval x b in if d = 0 then raise Undefined else eval x a div d end

fun show (Num n) = if n < 0 then "~" ^ Int.toString (~n) else Int.toString n
  | show X = "x"
  | show (Add (a, b)) = "(" ^ show a ^ " + " ^ show b ^ ")"
  | show (Mul (a, b)) = show a ^ "*" ^ show b
  | show (Neg a) = "-" ^ show a
  | show (Pow (a, n)) = show a ^ "^" ^ Int.toString n
  | show (Quot (a, b)) = "(" ^ show a ^ " / " ^ show b ^ ")"

(* (x + 1)^n * (x - 2), and its derivatives, each also divided by x - 1 where evaluated *)
fun poly n = Mul (Pow (Add (X, Num 1), n), Add (X, Neg (Num 2)))

fun values e =
  List.map (fn x => (Int.toString (eval x (Quot (e, Add (X, Neg (Num 1))))) handle Undefined => "undefined"))
           [~2, 0, 1, 3]

fun derivs (e, 0, acc) = List.rev acc
  | derivs (e, k, acc) = let val d = simplify (deriv e) in derivs (d, k - 1, d :: acc) end

fun report (i, e) =
  print ("d" ^ Int.toString i ^ ": size " ^ Int.toString (size_of e) ^ ", at ~2 0 1 3: "
         ^ String.concatWith " " (values e) ^ "\n")

fun number (_, []) = ()
  | number (i, e :: es) = (report (i, e); number (i + 1, es))

val p = simplify (poly size)
val _ = print (show p ^ "\n")
fun repeat 1 = derivs (p, size, [])
  | repeat k = let val _ = derivs (p, size, []) in repeat (k - 1) end
val _ = number (1, repeat rounds)
