(* Strings and chars: explode/implode, String.concatWith, Char.toUpper, substrings, Int.fromString and Int.toString (negatives print as ~5) *)
fun capitalize s =
  case explode s of
    [] => ""
  | c :: cs => implode (Char.toUpper c :: map Char.toLower cs)

fun words s =
  let
    fun go ([], cur, acc) = rev (if null cur then acc else implode (rev cur) :: acc)
      | go (#" " :: cs, cur, acc) = go (cs, [], if null cur then acc else implode (rev cur) :: acc)
      | go (c :: cs, cur, acc) = go (cs, c :: cur, acc)
  in
    go (explode s, [], [])
  end

fun reverse s = implode (rev (explode s))
fun isPalindrome s =
  let val letters = map Char.toLower (List.filter Char.isAlpha (explode s))
  in letters = rev letters end

fun caesar k s =
  let
    fun shift c =
      if Char.isAlpha c then
        let val base = if ord c >= ord #"a" then ord #"a" else ord #"A"
        in chr (base + (ord c - base + k) mod 26) end
      else c
  in
    String.implode (map shift (String.explode s))
  end

val sentence = "the quick brown fox jumps over the lazy dog"
val _ = print (String.concatWith " " (map capitalize (words sentence)) ^ "\n")
val _ = print ("words: " ^ Int.toString (length (words sentence)) ^ ", chars: " ^ Int.toString (size sentence) ^ "\n")
val _ = print ("reversed: " ^ reverse "stressed" ^ "\n")
val _ = app (fn s => print ("\"" ^ s ^ "\" palindrome: " ^ Bool.toString (isPalindrome s) ^ "\n"))
            ["A man, a plan, a canal: Panama", "hello"]
val secret = caesar 3 "Hello, World"
val _ = print (secret ^ " / " ^ caesar 23 secret ^ "\n")
val _ = print (String.substring ("functional", 0, 3) ^ "-" ^ String.substring ("functional", 4, 6) ^ "\n")
val _ = print ("prefix: " ^ Bool.toString (String.isPrefix "fun" "functional") ^ " "
               ^ Bool.toString (String.isPrefix "fact" "functional") ^ "\n")
val _ = print ("third char: " ^ str (String.sub ("abcdef", 2)) ^ ", ord a = " ^ Int.toString (ord #"a")
               ^ ", chr 90 = " ^ str (chr 90) ^ "\n")
val _ = print (concat ["con", "cat", "enated"] ^ " " ^ String.concat ["a", "b", "c"] ^ "\n")

(* numbers to and from strings; negative numbers are written with ~ *)
val _ = print (Int.toString (~5) ^ " " ^ Int.toString (3 - 10) ^ " " ^ Int.toString (~5 * ~5) ^ "\n")
fun showOpt NONE = "NONE"
  | showOpt (SOME n) = "SOME " ^ Int.toString n
val _ = app (fn s => print ("Int.fromString \"" ^ s ^ "\" = " ^ showOpt (Int.fromString s) ^ "\n"))
            ["123", "~42", "-7", "+5", "  15", "007", "12abc", "0x10", "abc", "~", ""]
val _ = print ("out of range: " ^ (showOpt (Int.fromString "4611686018427387904") handle Overflow => "Overflow") ^ "\n")
val digits = List.filter Char.isDigit (explode "a1b22c333")
val _ = print ("digits: " ^ implode digits ^ ", sum " ^ Int.toString (foldl (fn (d, s) => s + ord d - ord #"0") 0 digits) ^ "\n")
val _ = print ("escapes: tab[\t] quote[\"] backslash[\\]\n")
val _ = print ("compare: " ^ Bool.toString ("apple" < "banana") ^ " " ^ Bool.toString (#"z" > #"a") ^ "\n")
