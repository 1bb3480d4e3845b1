(* Integer arithmetic: gcd and lcm, extended Euclid, modular exponentiation, div/mod against quot/rem on negative numbers, digit sums and perfect numbers *)
fun gcd (a, 0) = Int.abs a
  | gcd (a, b) = gcd (b, a mod b)
fun lcm (a, b) = a div gcd (a, b) * b

(* returns (g, x, y) with a*x + b*y = g *)
fun egcd (a, 0) = (a, 1, 0)
  | egcd (a, b) = let val (g, x, y) = egcd (b, a mod b) in (g, y, x - (a div b) * y) end

fun powMod (b, 0, m) = 1 mod m
  | powMod (b, e, m) =
      let val h = powMod (b, e div 2, m)
          val h2 = h * h mod m
      in if e mod 2 = 0 then h2 else h2 * (b mod m) mod m end

fun digitSum n = if n < 10 then n else n mod 10 + digitSum (n div 10)
(* the sum of the proper divisors of n, pairing each divisor d below the square root with n div d *)
fun divisorSum n =
  let
    fun go (d, acc) =
      if d * d > n then acc
      else if n mod d <> 0 then go (d + 1, acc)
      else if d * d = n then go (d + 1, acc + d)
      else go (d + 1, acc + d + n div d)
  in
    go (2, 1)
  end

val _ = print ("gcd 84 36 = " ^ Int.toString (gcd (84, 36)) ^ ", lcm 4 6 = " ^ Int.toString (lcm (4, 6)) ^ "\n")
val (g, x, y) = egcd (240, 46)
val _ = print ("egcd 240 46 = " ^ Int.toString g ^ " = 240*" ^ Int.toString x ^ " + 46*" ^ Int.toString y ^ "\n")
val _ = print ("3^200 mod 1000007 = " ^ Int.toString (powMod (3, 200, 1000007)) ^ "\n")
val _ = print ("2^62 mod 97 = " ^ Int.toString (powMod (2, 62, 97)) ^ "\n")

fun row (a, b) =
  print (Int.toString a ^ " " ^ Int.toString b ^ ": div " ^ Int.toString (a div b) ^ " mod " ^ Int.toString (a mod b)
         ^ " quot " ^ Int.toString (Int.quot (a, b)) ^ " rem " ^ Int.toString (Int.rem (a, b)) ^ "\n")
val _ = app row [(7, 2), (~7, 2), (7, ~2), (~7, ~2)]

val _ = print ("digit sum of 987654321 = " ^ Int.toString (digitSum 987654321) ^ "\n")
val perfect = List.filter (fn n => divisorSum n = n) (List.tabulate (500, fn i => i + 2))
val _ = print ("perfect numbers below 500: " ^ String.concatWith " " (map Int.toString perfect) ^ "\n")
val _ = print ("min/max/abs: " ^ Int.toString (Int.min (3, ~8)) ^ " " ^ Int.toString (Int.max (3, ~8)) ^ " "
               ^ Int.toString (abs ~8) ^ " " ^ Int.toString (~ 8) ^ "\n")
val big = 4611686018427387903
val _ = print ("largest int: " ^ Int.toString big ^ ", smallest: " ^ Int.toString (~big - 1) ^ "\n")
