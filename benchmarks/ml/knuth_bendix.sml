(* Knuth-Bendix completion of the group axioms (Knuth-Bendix ordering, weights e 1, * 0, I 0,
   precedence I > * > e): matching, unification, critical pairs through contexts (closures),
   exceptions for failed matches and unifications; the completion runs `rounds` times. *)
val rounds = 3

datatype term = V of int | T of string * term list

exception NoMatch
exception NoUnify
exception Unorientable of term * term

fun lookupv (v, []) = NONE
  | lookupv (v, (w, t) :: s) = if v = w then SOME t else lookupv (v, s)

fun subst s (V v) = (case lookupv (v, s) of SOME t => t | NONE => V v)
  | subst s (T (f, ts)) = T (f, map (subst s) ts)

fun matchT (V v, t, s) =
      (case lookupv (v, s) of
         NONE => (v, t) :: s
       | SOME u => if u = t then s else raise NoMatch)
  | matchT (T (f, ps), T (g, ts), s) = if f = g then matchL (ps, ts, s) else raise NoMatch
  | matchT (T _, V _, _) = raise NoMatch
and matchL ([], [], s) = s
  | matchL (p :: ps, t :: ts, s) = matchL (ps, ts, matchT (p, t, s))
  | matchL _ = raise NoMatch

fun rewriteTop [] t = raise NoMatch
  | rewriteTop ((l, r) :: rules) t =
      subst (matchT (l, t, [])) r handle NoMatch => rewriteTop rules t

fun norm rules t =
  let val t' = case t of V _ => t | T (f, ts) => T (f, map (norm rules) ts)
  in norm rules (rewriteTop rules t') handle NoMatch => t' end

fun walk s (V v) = (case lookupv (v, s) of SOME t => walk s t | NONE => V v)
  | walk s t = t

fun occurs s v t =
  case walk s t of
    V w => v = w
  | T (_, ts) => List.exists (occurs s v) ts

fun unify (a, b, s) =
  case (walk s a, walk s b) of
    (V v, V w) => if v = w then s else (v, V w) :: s
  | (V v, t) => if occurs s v t then raise NoUnify else (v, t) :: s
  | (t, V v) => if occurs s v t then raise NoUnify else (v, t) :: s
  | (T (f, ts), T (g, us)) => if f = g then unifyL (ts, us, s) else raise NoUnify
and unifyL ([], [], s) = s
  | unifyL (t :: ts, u :: us, s) = unifyL (ts, us, unify (t, u, s))
  | unifyL _ = raise NoUnify

fun resolve s t =
  case walk s t of
    V v => V v
  | T (f, ts) => T (f, map (resolve s) ts)

fun rename k (V v) = V (v + k)
  | rename k (T (f, ts)) = T (f, map (rename k) ts)

(* the non-variable subterms of a term, each with the context that puts a term in its place *)
fun subterms (V _) k acc = acc
  | subterms (T (f, ts)) k acc =
      let
        fun args (pre, [], acc) = acc
          | args (pre, t :: post, acc) =
              args (t :: pre, post, subterms t (fn x => k (T (f, List.rev pre @ (x :: post)))) acc)
      in args ([], ts, (T (f, ts), k) :: acc) end

fun criticalPairs ((l1, r1), (l2, r2)) =
  let val l2 = rename 100 l2 and r2 = rename 100 r2
  in
    List.foldl (fn ((sub, ctx), acc) =>
                  (let val s = unify (sub, l2, []) in (resolve s r1, resolve s (ctx r2)) :: acc end)
                  handle NoUnify => acc)
               [] (subterms l1 (fn x => x) [])
  end

fun fweight "e" = 1
  | fweight _ = 0
fun prec "I" = 3
  | prec "*" = 2
  | prec _ = 1

fun weight (V _) = 1
  | weight (T (f, ts)) = List.foldl (fn (t, a) => weight t + a) (fweight f) ts

fun varcount v (V w) = if v = w then 1 else 0
  | varcount v (T (_, ts)) = List.foldl (fn (t, a) => varcount v t + a) 0 ts

fun vars (V v) acc = if List.exists (fn w => w = v) acc then acc else v :: acc
  | vars (T (_, ts)) acc = List.foldl (fn (t, a) => vars t a) acc ts

fun kbGreater (s, t) =
  List.all (fn v => varcount v s >= varcount v t) (vars t []) andalso
  (let val ws = weight s and wt = weight t
   in
     ws > wt orelse
     (ws = wt andalso
      (case (s, t) of
         (T (f, ss), T (g, ts)) => prec f > prec g orelse (f = g andalso lexGreater (ss, ts))
       | (T _, V _) => true
       | _ => false))
   end)
and lexGreater (s :: ss, t :: ts) = if s = t then lexGreater (ss, ts) else kbGreater (s, t)
  | lexGreater _ = false

fun orient (a, b) =
  if kbGreater (a, b) then (a, b)
  else if kbGreater (b, a) then (b, a)
  else raise Unorientable (a, b)

fun renumber (l, r) =
  let
    fun number ([], _, s) = s
      | number (v :: vs, i, s) = number (vs, i + 1, (v, V i) :: s)
    val s = number (List.rev (vars r (vars l [])), 1, [])
  in (subst s l, subst s r) end

fun reducible rules (V _) = false
  | reducible rules (t as T (_, ts)) =
      ((rewriteTop rules t; true) handle NoMatch => List.exists (reducible rules) ts)

fun complete (rules, []) = rules
  | complete (rules, (a, b) :: eqs) =
      let val a' = norm rules a and b' = norm rules b
      in
        if a' = b' then complete (rules, eqs)
        else
          let
            val r = renumber (orient (a', b'))
            val (back, keep) = List.partition (fn (l, _) => reducible [r] l) rules
            val keep' = map (fn (l, rr) => (l, norm (r :: keep) rr)) keep
            val rules' = keep' @ [r]
            val pairs = List.concat (map (fn q => criticalPairs (r, q) @ criticalPairs (q, r)) rules')
          in complete (rules', eqs @ back @ pairs) end
      end

fun show (V v) = "x" ^ Int.toString v
  | show (T (f, [])) = f
  | show (T ("*", [a, b])) = "(" ^ show a ^ " * " ^ show b ^ ")"
  | show (T (f, ts)) = f ^ "(" ^ String.concatWith ", " (map show ts) ^ ")"

val e = T ("e", [])
fun mul (a, b) = T ("*", [a, b])
fun inv a = T ("I", [a])
val axioms = [(mul (e, V 1), V 1), (mul (inv (V 1), V 1), e),
              (mul (mul (V 1, V 2), V 3), mul (V 1, mul (V 2, V 3)))]

fun run 1 = complete ([], axioms)
  | run n = let val _ = complete ([], axioms) in run (n - 1) end

val result = run rounds handle Unorientable (a, b) => (print ("unorientable: " ^ show a ^ " = " ^ show b ^ "\n"); [])
val _ = List.app (fn (l, r) => print (show l ^ " -> " ^ show r ^ "\n")) result
val _ = print (Int.toString (List.length result) ^ " rules\n")
