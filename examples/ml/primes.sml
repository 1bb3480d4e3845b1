(* Prime numbers: a sieve of Eratosthenes on lists, trial division, prime factorisation and Goldbach pairs *)
fun range (a, b) = if a > b then [] else a :: range (a + 1, b)

fun sieve [] = []
  | sieve (p :: xs) = p :: sieve (List.filter (fn x => x mod p <> 0) xs)

fun isPrime n =
  n >= 2 andalso
  let fun noDivisor d = d * d > n orelse (n mod d <> 0 andalso noDivisor (d + 1))
  in noDivisor 2 end

fun factors n =
  let
    fun go (1, _) = []
      | go (m, d) = if d * d > m then [m] else if m mod d = 0 then d :: go (m div d, d) else go (m, d + 1)
  in
    go (n, 2)
  end

val ps = sieve (range (2, 200))
val _ = print ("primes below 200: " ^ Int.toString (length ps) ^ "\n")
val _ = print (String.concatWith " " (map Int.toString (List.take (ps, 15))) ^ " ...\n")
val _ = print ("sieve agrees with trial division: " ^ Bool.toString (ps = List.filter isPrime (range (1, 200))) ^ "\n")
val _ = app (fn n => print (Int.toString n ^ " = " ^ String.concatWith " * " (map Int.toString (factors n)) ^ "\n"))
            [360, 97, 1001, 65536, 999983 * 3]
fun goldbach n = List.find (fn p => isPrime (n - p)) (List.filter isPrime (range (2, n div 2)))
val _ = app (fn n => case goldbach n of
                       SOME p => print (Int.toString n ^ " = " ^ Int.toString p ^ " + " ^ Int.toString (n - p) ^ "\n")
                     | NONE => print (Int.toString n ^ ": no pair\n"))
            [4, 28, 100, 98]
val twins = List.filter (fn p => isPrime (p + 2)) ps
val _ = print ("twin primes: " ^ String.concatWith " " (map (fn p => "(" ^ Int.toString p ^ "," ^ Int.toString (p + 2) ^ ")") (List.take (twins, 6))) ^ "\n")
